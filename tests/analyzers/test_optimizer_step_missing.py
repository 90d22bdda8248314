"""optimizer-step-missing: gradients computed and no weight ever changes."""
import pytest

pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")

import torch  # noqa: E402
from _optim_training import train, train_gan  # noqa: E402

import tracelab  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _diagnosis(path):
    diagnosis = tracelab.analyze(path)
    assert not diagnosis.errors, diagnosis.errors
    return diagnosis


@pytest.mark.parametrize("fault,cause,fix", [
    ({"call_step": False}, "not_called", "Call optimizer.step()"),
    ({"zero_grad_before_step": True}, "zeroed_before_step", "never between backward()"),
    ({"optimizer": lambda p: torch.optim.SGD(p, lr=0.0)}, "zero_lr", "non-zero learning rate"),
])
def test_a_step_that_changes_nothing_is_named_first(tmp_path, fault, cause, fix):
    diagnosis = _diagnosis(train(tmp_path / "r", steps=40, **fault))
    first = diagnosis.diagnoses[0].finding
    assert first.rule == "optimizer-step-missing" and first.evidence["cause"] == cause
    assert fix in first.fix


@pytest.mark.parametrize("skip,stuck", [("d", "1"), ("g", "0")])
def test_a_gan_network_whose_optimizer_never_steps_is_named(tmp_path, skip, stuck):
    found = [f for f in _diagnosis(train_gan(tmp_path / "r", skip=skip)).findings
             if f.rule == "optimizer-step-missing"]
    assert [f.evidence["optimizer"] for f in found] == [stuck]
    assert found[0].evidence["cause"] == "not_called" and f"'{stuck}'" in found[0].fix


def test_ordinary_runs_stay_quiet(tmp_path):
    for name, kw in (("sgd", {}), ("adam", {"optimizer": lambda p: torch.optim.Adam(p, 1e-3)})):
        found = _diagnosis(train(tmp_path / name, steps=40, **kw)).findings
        assert "optimizer-step-missing" not in {f.rule for f in found}


def test_a_run_without_an_optimizer_is_not_judged_nor_told_to_lower_its_lr(tmp_path):
    from _optim_training import batches, model
    torch.manual_seed(0)
    net = model()
    with tracelab.Recorder(str(tmp_path / "r"), model=net, flush_interval=0.5) as rec:
        for x, y in batches(40):
            net.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            with torch.no_grad():
                for p in net.parameters():
                    p -= 5.0 * p.grad  # a hand-written update, far too large
            rec.step(loss=loss, inputs=x, targets=y)
    diagnosis = _diagnosis(tmp_path / "r")
    assert "optimizer-step-missing" in {s.rule for s in diagnosis.skipped}
    judged = [f for f in diagnosis.findings
              if f.rule in ("learning-rate-too-high", "update-ratio", "loss-oscillation")]
    assert all("its learning rate is unknown" in f.fix for f in judged)
    # A learning-rate rule's finding says that no LR was known (lr_known False, the fix
    # NO_OPTIMIZER_FIX), so the premise that an LR moves the model holds for it; a finding
    # whose fix says to lower the LR is contradicted by the run.
    import dataclasses

    from tracelab.analyzers._learning_rate import (LR_KNOWN, LR_MOVES_THE_MODEL,
                                                   NO_OPTIMIZER_FIX, lr_known)
    from tracelab.core.findings import WARNING, Finding
    assert lr_known(diagnosis.run) is False
    told = Finding("update-ratio", "TL206", WARNING, "0.weight", (0, 39), "Updates are too "
                   "large.", {LR_KNOWN: lr_known(diagnosis.run)}, NO_OPTIMIZER_FIX)
    assert not any(LR_MOVES_THE_MODEL.judge(diagnosis.run, told))
    untold = dataclasses.replace(told, evidence={}, fix="Lower the learning rate.")
    assert "without an optimizer object" in LR_MOVES_THE_MODEL.judge(
        diagnosis.run, untold).contradicted


def test_one_of_two_optimizers_at_learning_rate_0_is_named_by_its_lr_scalars(tmp_path):
    from _optim_training import batches, model
    from tracelab.analyzers._learning_rate import group_of, lr_name
    torch.manual_seed(0)
    net = model()
    first, rest = list(net[0].parameters()), [p for m in net[1:] for p in m.parameters()]
    opts = [torch.optim.SGD(first, lr=0.0), torch.optim.SGD(rest, lr=0.1, momentum=0.9)]
    with tracelab.Recorder(str(tmp_path / "r"), model=net, optimizer=opts,
                           flush_interval=0.5) as rec:
        for x, y in batches(40):
            for opt in opts:
                opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            for opt in opts:
                opt.step()
            rec.step(loss=loss, inputs=x, targets=y)
    run = tracelab.open_run(tmp_path / "r")
    keys = list(run.meta["optimizers"])
    lrs = sorted({str(n) for n in run.scalars["name"] if str(n).startswith("lr/")})
    assert [group_of(n, run.meta["optimizers"]) for n in lrs] == [(k, 0) for k in keys]
    assert [lr_name(k, 0, len(keys)) for k in keys] == lrs
    found = [f for f in _diagnosis(tmp_path / "r").findings
             if f.rule == "optimizer-step-missing"]
    assert [(f.evidence["optimizer"], f.evidence["cause"]) for f in found] == [
        (keys[0], "zero_lr")]


def test_a_learning_rate_s_name_gives_its_optimizer_and_group():
    from tracelab.analyzers._learning_rate import group_of, lr_name
    one, two = {"0": {}}, {"g": {}, "d/x": {}}
    assert group_of(lr_name("0", 2, 1), one) == ("0", 2)
    assert group_of(lr_name("d/x", 1, 2), two) == ("d/x", 1)
    assert group_of("lr/3", two) == (None, 3) and group_of("lr/3", None) == (None, 3)
    assert [group_of(n, one) for n in ("loss", "lr/", "lr/x", "lr/g/a", 5)] == [None] * 5


def test_an_optimizer_built_on_another_instance_of_the_model_is_named(tmp_path):
    # The model created again after the optimizer was built on the first instance: step()
    # runs, on parameters that are not the trained model's.
    from _optim_training import model
    diagnosis = _diagnosis(train(tmp_path / "r", steps=40,
                                 params=lambda net: model().parameters()))
    first = diagnosis.diagnoses[0].finding
    assert first.rule == "optimizer-step-missing" and first.evidence["cause"] == "other_model"
    assert first.evidence["held_elsewhere"] > 0 and "model the loop trains" in first.fix
    # Nothing was left out of that optimizer: param-not-in-optimizer stays quiet.
    assert "param-not-in-optimizer" not in {f.rule for f in diagnosis.findings}


def test_a_part_of_the_model_left_out_is_not_another_model(tmp_path):
    # The optimizer holds some of the model's parameters: param-not-in-optimizer's case.
    diagnosis = _diagnosis(train(tmp_path / "r", steps=40,
                                 params=lambda net: list(net.parameters())[:2]))
    rules = {f.rule for f in diagnosis.findings}
    assert "param-not-in-optimizer" in rules
    assert all(f.evidence.get("cause") != "other_model" for f in diagnosis.findings
               if f.rule == "optimizer-step-missing")


def test_a_generator_detached_in_its_own_step_is_frozen_not_a_step_never_called(tmp_path):
    # Its optimizer's step runs on no gradient (grad_norm/step/0 is 0): the step was called,
    # and the loss it steps on does not reach the generator.
    diagnosis = _diagnosis(train_gan(tmp_path / "r", skip="detach"))
    assert "optimizer-step-missing" not in {f.rule for f in diagnosis.findings}
    first = diagnosis.diagnoses[0].finding
    assert first.rule == "frozen-parameters" and first.subject.startswith("g.")
    assert "optimizer '0' stepped with no gradient at all" in first.message
    assert ".detach()" in first.fix


def test_a_healthy_gan_has_no_frozen_or_missing_step(tmp_path):
    found = {f.rule for f in _diagnosis(train_gan(tmp_path / "r")).findings}
    assert not found & {"frozen-parameters", "optimizer-step-missing"}
