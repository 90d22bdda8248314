"""The signals table (loop_checks.py) against what plain torch shows of the same loop."""
import pytest
import torch

import tracelab
from tracelab.core.run import open_run


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Dropout(0.2),
                               torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 3))


@pytest.mark.parametrize("reset", ["none", "set_to_none", "zeros", "accumulate"])
def test_grad_leftover_is_what_the_watched_grad_held_before_backward(tmp_path, reset):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    watched = model[4].bias  # the smallest parameter, the last of them
    expected = []
    with tracelab.Recorder(str(tmp_path / "run"), model=model, optimizer=opt) as rec:
        for step in range(6):
            if reset in ("set_to_none", "accumulate"):
                opt.zero_grad()
            elif reset == "zeros":
                opt.zero_grad(set_to_none=False)
            g = watched.grad
            expected.append(0.0 if g is None else float(g.abs().max()))
            for _ in range(3 if reset == "accumulate" else 1):
                x, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
                torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            rec.step(loss=1.0)
    run = open_run(tmp_path / "run")
    got = run.signal("grad_leftover")
    assert list(got.index) == list(range(6))
    assert got.tolist() == pytest.approx(expected, rel=1e-6)
    assert (got.iloc[1:] > 0).all() == (reset == "none")


def test_eval_modes_are_those_of_the_last_evaluation_forward_pass(tmp_path):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with tracelab.Recorder(str(tmp_path / "run"), model=model, optimizer=opt) as rec:
        for step in range(4):
            model.train()
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(torch.randn(16, 5)),
                                              torch.randint(0, 3, (16,))).backward()
            opt.step()
            rec.step(loss=1.0)
            if step == 1:  # forgot model.eval()
                with torch.no_grad():
                    model(torch.randn(16, 5))
                rec.log("val", {"loss": 1.0})
            if step == 3:  # evaluated in eval mode, back in train mode before log()
                model.eval()
                with torch.no_grad():
                    model(torch.randn(16, 5))
                model.train()
                rec.log("val", {"loss": 1.0})
        model.train()
        rec.log("test", {"loss": 1.0})  # no evaluation pass seen: the modes at the call
    run = open_run(tmp_path / "run")
    for name, want in (("train_mode/model", [1, 0]), ("train_mode/dropout", [1, 0]),
                       ("train_mode/batchnorm", [1, 0]), ("modules/dropout", [1, 1]),
                       ("modules/batchnorm", [1, 1])):
        assert run.signal(name, "val").tolist() == want, name
    assert run.signal("train_mode/dropout", "test").tolist() == [1]
    assert run.signal("grad_leftover").tolist() == [0.0] * 4


def test_grad_scaler_scale_is_recorded_every_step(tmp_path):
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
    scales = []
    with tracelab.Recorder(str(tmp_path / "run"), model=model, optimizer=opt,
                           scaler=scaler) as rec:
        for step in range(6):
            opt.zero_grad()
            x = torch.randn(8, 4)
            if step == 3:
                x[0, 0] = float("inf")  # this step overflows and is skipped
            scaler.scale(model(x).pow(2).mean()).backward()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
            rec.step(loss=1.0)
    run = open_run(tmp_path / "run")
    assert run.signal("amp/scale").tolist() == scales and scales[3] < scales[2]
    assert run.signal("amp/skipped").tolist() == [0, 0, 0, 1, 0, 0]


def test_weights_moved_is_whether_the_watched_parameter_changed_between_passes(tmp_path):
    """backward/weights_moved against torch.equal of the watched parameter at each later pass
    and at the step's first; a NaN weight that stays NaN has not moved."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    watched = model[4].bias  # the smallest parameter, the last of them
    expected = []
    with tracelab.Recorder(str(tmp_path / "run"), model=model, optimizer=opt) as rec:
        for step in range(6):
            opt.zero_grad()
            if step == 5:
                with torch.no_grad():
                    watched[0] = float("nan")
            moved = False
            for i in range(3):
                if i == 0:
                    first = watched.detach().clone()
                elif i == 2 and step in (1, 4):
                    with torch.no_grad():
                        watched.add_(1e-3)  # moved between passes, as SAM moves every weight
                x, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
                out = model(x)
                moved |= i > 0 and not torch.equal(watched.nan_to_num(), first.nan_to_num())
                torch.nn.functional.cross_entropy(out, y).backward()
            opt.step()
            rec.step(loss=1.0)
            expected.append(float(moved))
    run = open_run(tmp_path / "run")
    assert expected == [0, 1, 0, 0, 1, 0]
    assert run.signal("backward/weights_moved").tolist() == expected
    assert run.signal("backward/passes").tolist() == [3] * 6


def _penalty_loop(run_dir, by_hand: bool):
    """A gradient penalty taken with torch.autograd.grad before backward (or, `by_hand`, grads
    assigned from torch.autograd.grad with no backward at all, as PCGrad and MAML's outer step
    do): one backward pass per step into .grad, or none. Returns the final parameters."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rec = None if run_dir is None else tracelab.Recorder(str(run_dir), model=model, optimizer=opt)
    for step in range(8):
        x, y = torch.randn(16, 5, requires_grad=True), torch.randint(0, 3, (16,))
        loss = torch.nn.functional.cross_entropy(model(x), y)
        params = list(model.parameters())
        if by_hand:
            for p, g in zip(params, torch.autograd.grad(loss, params)):
                p.grad = g
        else:
            opt.zero_grad()
            grads = torch.autograd.grad(loss, params, create_graph=True)
            penalty = sum(g.pow(2).sum() for g in grads)
            (loss + 0.1 * penalty).backward()
        opt.step()
        if rec is not None:
            rec.step(loss=loss)
    if rec is not None:
        rec.close()
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("by_hand", [False, True])
def test_torch_autograd_grad_is_not_a_backward_pass_of_the_step(tmp_path, by_hand):
    """autograd.grad runs the gradient hooks and leaves .grad alone: it is neither a second
    backward pass (a reset inside an accumulation loop) nor a leftover gradient."""
    recorded = _penalty_loop(tmp_path / "run", by_hand)
    plain = _penalty_loop(None, by_hand)
    assert all(torch.equal(a, b) for a, b in zip(recorded, plain))
    run = open_run(tmp_path / "run")
    names = set(run.signals["name"])
    if by_hand:  # no backward ever accumulated into .grad: nothing to judge
        assert not names & {"grad_leftover", "backward/passes", "backward/resets"}
    else:
        assert (run.signal("backward/passes") == 1).all()
        assert (run.signal("backward/resets") == 0).all()
        assert (run.signal("grad_leftover") == 0).all() and len(run.signal("grad_leftover")) == 8
    findings = {f.rule for f in tracelab.analyze(run).findings}
    assert not findings & {"gradient-accumulation", "missing-zero-grad"}


def test_a_large_watched_parameter_is_not_copied_and_its_weights_moved_not_recorded(
        tmp_path, monkeypatch):
    from tracelab.recorders import loop_checks
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for limit, run_dir in ((1 << 16, tmp_path / "small"), (2, tmp_path / "large")):
        monkeypatch.setattr(loop_checks, "_MOVED_COPY_MAX", limit)
        with tracelab.Recorder(str(run_dir), model=model, optimizer=opt) as rec:
            for step in range(3):
                opt.zero_grad()
                for _ in range(2):  # accumulation: two passes, the weights unmoved between them
                    torch.nn.functional.cross_entropy(
                        model(torch.randn(16, 5)), torch.randint(0, 3, (16,))).backward()
                opt.step()
                rec.step(loss=1.0)
    small, large = open_run(tmp_path / "small"), open_run(tmp_path / "large")
    assert (small.signal("backward/weights_moved") == 0).all()
    assert "backward/weights_moved" not in set(large.signals["name"])
    assert (large.signal("backward/passes") == 2).all()
