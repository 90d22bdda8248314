"""missing-zero-grad: gradients left over from the previous optimizer step."""
import numpy as np
import pytest
import pandas as pd

from tracelab.analyzers.missing_zero_grad import missing_zero_grad
from tracelab.core.run import Run


def _run(leftover):
    signals = pd.DataFrame({"step": range(len(leftover)), "split": "train",
                            "name": "grad_leftover", "value": np.asarray(leftover, float)})
    return Run.from_frames(signals=signals)


def test_fires_when_gradients_are_never_reset():
    [f] = missing_zero_grad(_run([0.0] + list(np.linspace(0.1, 3.0, 30))))
    assert f.code == "TL602" and f.severity.value == "error"
    assert f.evidence["steps_not_reset"] == 30 and "optimizer.zero_grad()" in f.fix


def test_a_nan_left_over_counts():
    [f] = missing_zero_grad(_run([0.0] + [np.nan] * 10))
    assert f.evidence["steps_not_reset"] == 10


def test_quiet_when_gradients_are_reset_or_rarely_left_over():
    assert missing_zero_grad(_run([0.0] * 40)) == []
    rare = [0.0] * 40
    rare[7] = rare[30] = 0.5  # a hand-written loop that skipped zero_grad twice
    assert missing_zero_grad(_run(rare)) == []
    assert missing_zero_grad(_run([0.0, 1.0, 2.0])) == []  # too few steps


def test_not_recorded_on_runs_without_the_signal():
    from tracelab.core.schema import Needs
    assert Needs.GRAD_RESETS not in Run.from_frames().available


def _judged(params, optimizers=None):
    """The verdict of missing-zero-grad's premise on a run whose model has `params`: (name,
    shape, in_optimizer)."""
    from tracelab.analyzers.missing_zero_grad import ZERO_GRAD_RESETS_IT
    meta = {"model": {"parameters": [{"name": n, "shape": s, "requires_grad": True,
                                      "in_optimizer": held} for n, s, held in params]}}
    if optimizers is not None:
        meta["optimizers"] = optimizers
    run = Run.from_frames(meta)
    [f] = missing_zero_grad(_run([0.0] + [0.5] * 10))
    return ZERO_GRAD_RESETS_IT.judge(run, f)


def test_the_watched_parameter_is_the_last_of_the_smallest():
    from tracelab.analyzers._learning_rate import watched_parameter
    params = [{"name": n, "shape": s} for n, s in
              (("0.weight", [4, 8]), ("0.bias", [4]), ("2.weight", [2, 4]), ("2.bias", [4]),
               ("3.empty", [0]))]
    assert watched_parameter({"model": {"parameters": params}}) == "2.bias"
    assert watched_parameter({"model": {"parameters": params},
                              "sharded_parameters": ["2.bias"]}) == "0.bias"
    assert watched_parameter({}) is None


def test_its_fix_is_contradicted_when_no_optimizer_holds_the_watched_parameter():
    head_left_out = [("0.weight", [4, 8], True), ("0.bias", [4], True),
                     ("2.weight", [2, 4], False), ("2.bias", [2], False)]
    verdict = _judged(head_left_out)
    assert "'2.bias' is in no optimizer" in verdict.contradicted
    every = [(n, s, True) for n, s, _ in head_left_out]
    assert not any(_judged(every))
    # A group's parameter names say so as well as in_optimizer does.
    named = {"0": {"type": "SGD", "groups": [{"lr": 0.1, "params": ["0.weight", "2.bias"]}]}}
    assert not any(_judged([(n, s, None) for n, s, _ in head_left_out], named))
    unknown = _judged([(n, s, None) for n, s, _ in head_left_out])
    assert not unknown.contradicted and "pass model= and optimizer=" in unknown.missing


def test_odd_facts_leave_the_premise_undecided():
    from tracelab.analyzers._learning_rate import LR_MOVES_THE_MODEL
    from tracelab.analyzers.missing_zero_grad import ZERO_GRAD_RESETS_IT
    [f] = missing_zero_grad(_run([0.0] + [0.5] * 10))
    for meta in ({"optimizers": ["SGD"], "model": {"parameters": "all"}},
                 {"optimizers": {"0": {"groups": "x"}}, "model": "Net"},
                 {"model": {"parameters": [{"name": "w", "shape": ["?"]}, 3]}}):
        run = Run.from_frames(meta)
        assert ZERO_GRAD_RESETS_IT.judge(run, f).missing
        assert not LR_MOVES_THE_MODEL.judge(run, f).contradicted


# A real GAN with two optimizers (tests/analyzers/_gan_runs.py): the generator's backward pass
# adds to the discriminator's grads by design, so resets are judged between two steps of the
# optimizer that holds the watched parameter (the discriminator's smallest).

def _gan_run(tmp_path, bug):
    pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
    from _gan_runs import gan
    from tracelab.core.run import open_run
    return open_run(gan(tmp_path / str(bug), bug=bug))


@pytest.mark.usefixtures("one_thread")
def test_fires_on_a_gan_whose_discriminator_step_misses_its_zero_grad(tmp_path):
    run = _gan_run(tmp_path, "no-d-zero")
    left = run.signal("grad_leftover").iloc[1:]
    assert len(left) >= 100 and (left > 0).all()
    [f] = missing_zero_grad(run)
    assert f.severity.value == "error" and f.evidence["share"] == 1.0
    assert "optimizer 'D'" in f.fix and "'D.4.bias'" in f.fix


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("bug", [None, "g-steps-d"])
def test_quiet_on_a_gan_that_resets_each_optimizers_grads(tmp_path, bug):
    """As published, the generator's pass leaves the discriminator's grads stale until its
    next step's D.zero_grad(); with the generator step calling the discriminator's optimizer
    (another fault), that optimizer steps twice per step(), once with its grads reset."""
    run = _gan_run(tmp_path, bug)
    left = run.signal("grad_leftover").iloc[1:]
    assert len(left) >= 100 and (left == 0).all()
    assert missing_zero_grad(run) == []


def _unrelated_targets_run(path, reset_until):
    """A classifier on inputs that carry nothing of their 10 classes (the loss stays at the
    constant prediction's, target-problems' finding), zero_grad() called on the steps before
    `reset_until` only."""
    torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
    import tracelab
    torch.set_num_threads(1)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 10, (4096,), generator=g)
    x = torch.randn(4096, 16, generator=g)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 10))
    ce = torch.nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=ce) as rec:
        for step in range(300):
            xb, yb = x[step * 13:step * 13 + 32], y[step * 13:step * 13 + 32]
            if step < reset_until:
                opt.zero_grad()
            loss = ce(model(xb), yb)
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xb, targets=yb)
    return tracelab.analyze(str(path)).diagnoses


def test_gradients_never_reset_explain_a_model_that_never_beats_the_constant(tmp_path):
    [first, *_] = _unrelated_targets_run(tmp_path / "r", reset_until=0)
    assert first.finding.rule == "missing-zero-grad"
    assert "target-problems" in {f.rule for f in first.explains}


def test_a_model_that_learned_nothing_while_resetting_is_not_explained_by_a_late_miss(tmp_path):
    # zero_grad() dropped only halfway: the first half learned nothing with its resets.
    ranked = _unrelated_targets_run(tmp_path / "r", reset_until=150)
    by_rule = {d.finding.rule: d for d in ranked}
    assert "missing-zero-grad" in by_rule and "target-problems" in by_rule
    assert "target-problems" not in {f.rule for f in by_rule["missing-zero-grad"].explains}


def test_the_link_needs_the_reset_missing_from_the_start_on_nearly_every_step():
    from tracelab.analyzers.missing_zero_grad import _reset_missing_throughout
    from tracelab.core.findings import ERROR, Finding
    effect = Finding("target-problems", "TL604", ERROR, "targets", (0, 299), "", {})

    def cause(share, steps=(1, 299)):
        return Finding("missing-zero-grad", "TL602", ERROR, "optimizer", steps, "",
                       {"share": share})
    assert _reset_missing_throughout(cause(1.0), effect)
    assert not _reset_missing_throughout(cause(0.6), effect)
    assert not _reset_missing_throughout(cause(1.0, (150, 299)), effect)
    assert not _reset_missing_throughout(cause("?"), effect)


def _gated_branch_run(path, reset_each_step):
    """A classifier with a one-output side branch (its bias, one number, is the smallest
    parameter: the recorder watches it) that a gate switches off after the first of three
    epochs: from then on it gets gradients of exactly zero. zero_grad() is called once per
    step, or once per epoch (the fault)."""
    torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
    import tracelab
    from _contract_runs import blobs
    torch.set_num_threads(1)
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.main = torch.nn.Linear(16, 4)
            self.side = torch.nn.Linear(16, 1)
            self.gate = 1.0

        def forward(self, x):
            return self.main(x) + self.gate * self.side(x)

    x, y = blobs(640)
    model = Net()
    ce = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=ce) as rec:
        for epoch in range(3):
            model.gate = 1.0 if epoch == 0 else 0.0
            if not reset_each_step:
                opt.zero_grad()
            for i in range(0, 640, 32):
                if reset_each_step:
                    opt.zero_grad()
                loss = ce(model(x[i:i + 32]), y[i:i + 32])
                loss.backward()
                opt.step()
                rec.step(loss=loss, inputs=x[i:i + 32], targets=y[i:i + 32])
    from tracelab.core.run import open_run
    return open_run(str(path))


@pytest.mark.usefixtures("one_thread")
def test_zeros_found_after_passes_that_gave_no_gradient_prove_no_reset(tmp_path):
    """zero_grad() once per epoch: the first epoch's 19 steps find the gradient left over;
    the later ones find zeros only because the gated branch got none, which is what a missing
    reset leaves too, so they do not outvote the first epoch."""
    run = _gated_branch_run(tmp_path / "epoch", reset_each_step=False)
    left = run.signal("grad_leftover").iloc[1:]
    assert (left > 0).sum() == 19 and (left == 0).sum() > 19  # a minority left over
    [f] = missing_zero_grad(run)
    assert f.evidence["steps_not_reset"] == 19 and f.evidence["share"] > 0.9


@pytest.mark.usefixtures("one_thread")
def test_quiet_when_each_step_resets_though_a_branch_gets_no_gradient(tmp_path):
    run = _gated_branch_run(tmp_path / "step", reset_each_step=True)
    assert (run.signal("grad_leftover") == 0).all()
    assert missing_zero_grad(run) == []
