"""update-ratio on real tiny trainings: updates that the learning rate keeps too small to move
the model (Adam's per-element step is about lr; SGD's is lr * grad) in a run whose loss does not
fall, and the healthy runs with small updates it leaves alone."""
import pytest

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
nn = torch.nn

import tracelab  # noqa: E402
from _contract_runs import train  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _data(n=2048):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 20, generator=g)
    return x, (x[:, :3].sum(1) > 0).long() + (x[:, 3] > 0.5).long()


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 3))


def _analyze(path):
    diagnosis = tracelab.analyze(path)
    assert not diagnosis.errors, diagnosis.errors
    return diagnosis


def _mine(diagnosis):
    return [f for f in diagnosis.findings if f.rule == "update-ratio"]


def _trained(tmp_path, make_optimizer, steps=60, *, model=None, known=True, name="r"):
    """`known`: the loss function is given to the recorder (the constant prediction's loss
    is then known); `model`: one trained before, else a fresh MLP."""
    model = model or _mlp()
    return train(tmp_path / name, model, _data(), nn.CrossEntropyLoss(),
                 loss_fn=nn.CrossEntropyLoss() if known else None,
                 optimizer=make_optimizer(model.parameters()), steps=steps)


@pytest.mark.parametrize("optimizer,kind", [
    (lambda p: torch.optim.Adam(p, lr=3e-5), "Adam"),
    (lambda p: torch.optim.SGD(p, lr=1e-4, momentum=0.9), "SGD")])
def test_a_learning_rate_too_low_to_move_the_model_is_named_before_the_plateau(
        tmp_path, optimizer, kind):
    # lr 3e-5 against weights of rms ~0.1: each step moves them by ~2e-4 of their size, above
    # the 1e-5 that marks layers that barely move, yet the loss falls ~2 % in 60 steps.
    diagnosis = _analyze(_trained(tmp_path, optimizer))
    [f] = _mine(diagnosis)
    assert f.message.startswith(f"Updates are too small to move the model: with {kind} at")
    assert 1e-5 < f.evidence["worst_ratio"] < 10 ** -3.5 and f.evidence["loss_fall"] < 0.03
    assert "Raise the learning rate" in f.fix
    first = diagnosis.diagnoses[0]
    assert first.finding.id == f.id and [e.rule for e in first.explains] == ["loss-plateau"]


def test_a_healthy_learning_rate_is_quiet(tmp_path):
    assert _mine(_analyze(_trained(tmp_path, lambda p: torch.optim.Adam(p, lr=1e-2)))) == []


def test_a_small_learning_rate_whose_loss_still_falls_is_quiet(tmp_path):
    # The same small lr over 600 steps: the loss falls ~5 %, a slow fine-tuning, not a stall.
    path = _trained(tmp_path, lambda p: torch.optim.Adam(p, lr=3e-5), steps=600)
    assert _mine(_analyze(path)) == []


def test_a_schedule_that_decayed_early_is_judged_at_its_peak(tmp_path):
    # lr 0.05 decayed to 2.5e-4 after the first step: the later updates are small and the loss
    # stalls, but the learning rate the run chose moved the weights; lr-schedule names it.
    from tracelab.analyzers._slow_updates import TOO_SMALL, loss_fall
    from tracelab.core.run import open_run
    model, (x, y), ce = _mlp(), _data(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 if s < 2 else 5e-3)
    path = tmp_path / "r"
    with tracelab.Recorder(str(path), model=model, optimizer=opt, input_every=5) as rec:
        for step in range(60):
            i = step * 32
            opt.zero_grad()
            loss = ce(model(x[i:i + 32]), y[i:i + 32])
            loss.backward()
            opt.step()
            sched.step()
            rec.step(loss=loss, inputs=x[i:i + 32], targets=y[i:i + 32])
    run = open_run(path)
    ratio = run.stat("update", "norm") / run.stat("weight", "norm")
    # The recorded steps alone look too small, and the loss stalls.
    assert ratio["0.weight"].median() < TOO_SMALL and loss_fall(run) < 0.03
    diagnosis = _analyze(path)
    assert _mine(diagnosis) == [] and any(f.rule == "lr-schedule" for f in diagnosis.findings)


def _stalled(diagnosis):
    return [f for f in _mine(diagnosis) if "too small to move the model" in f.message]


def _pretrained():
    """The MLP trained to a low loss first: the checkpoint a resumed run starts from."""
    model, (x, y), ce = _mlp(), _data(), nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(600):
        i = (step * 32) % (len(x) - 31)
        opt.zero_grad()
        ce(model(x[i:i + 32]), y[i:i + 32]).backward()
        opt.step()
    return model


@pytest.mark.parametrize("optimizer", [lambda p: torch.optim.Adam(p, lr=3e-5),
                                       lambda p: torch.optim.SGD(p, lr=1e-4, momentum=0.9)])
def test_a_trained_model_resumed_at_a_small_learning_rate_is_quiet(tmp_path, optimizer):
    # Its loss starts far below the constant prediction's (log 3 or less) and cannot fall
    # 3 %: it has little left to learn, however small its updates.
    from tracelab.analyzers._loss_contracts import constant_loss
    from tracelab.analyzers._slow_updates import loss_fall
    from tracelab.core.run import open_run
    path = _trained(tmp_path, optimizer, model=_pretrained())
    run = open_run(path)
    assert float(run.loss().iloc[:5].median()) < 0.5 * constant_loss(run)
    assert loss_fall(run) < 0.03
    assert _stalled(_analyze(path)) == []
    # The fresh model at the same learning rate starts at the constant prediction: named.
    assert len(_stalled(_analyze(_trained(tmp_path, optimizer, name="fresh")))) == 1


def test_without_the_constant_predictions_loss_a_stall_is_not_judged(tmp_path):
    # No loss function recorded: a finished model cannot be told from a starved one.
    path = _trained(tmp_path, lambda p: torch.optim.Adam(p, lr=3e-5), known=False)
    assert _stalled(_analyze(path)) == []


def _frozen_after(path, lr, first_steps, steps=100):
    """The MLP under Adam at `lr`, its first layer frozen (requires_grad_(False)) after
    `first_steps` steps; every step recorded."""
    model = _mlp()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    x, y = _data()
    ce = nn.CrossEntropyLoss()
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=ce) as rec:
        for step in range(steps):
            if step == first_steps:
                model[0].requires_grad_(False)
            i = (step * 32) % (len(x) - 32)
            opt.zero_grad()
            loss = ce(model(x[i:i + 32]), y[i:i + 32])
            loss.backward()
            opt.step()
            rec.step(loss=loss, targets=y[i:i + 32])
    return path


def test_a_layer_that_stopped_moving_took_no_small_steps(tmp_path):
    """A layer frozen after its first step (or whose units died after it) has updates of
    exactly zero from then on: no step, not a small one; its one step was of the usual size."""
    assert _mine(_analyze(_frozen_after(tmp_path / "frozen", 1e-3, 1))) == []
    # the same loop at a learning rate that moves nothing: its tiny steps are named
    [f] = _mine(_analyze(_frozen_after(tmp_path / "tiny", 1e-7, 1000)))
    assert "too small" in f.message and f.evidence["worst_ratio"] < 1e-5
