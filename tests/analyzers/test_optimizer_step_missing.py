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
