"""weight-decay-too-high: decay that shrinks every layer while the loss stays high."""
import pytest

pytest.importorskip("torch", reason="the tiny trainings need torch (extra 'torch')")

import torch  # noqa: E402
from _optim_training import train  # noqa: E402

import tracelab  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")
O = torch.optim


def _diagnosis(path):
    diagnosis = tracelab.analyze(path)
    assert not diagnosis.errors, diagnosis.errors
    return diagnosis


@pytest.mark.parametrize("optimizer,kind", [
    (lambda p: O.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.1), "SGD"),
    (lambda p: O.AdamW(p, lr=1e-2, weight_decay=50.0), "AdamW"),
    (lambda p: O.Adam(p, lr=1e-3, weight_decay=0.1), "Adam"),  # AdamW's value as Adam's L2
])
def test_decay_that_outweighs_the_gradients_is_named_first(tmp_path, optimizer, kind):
    diagnosis = _diagnosis(train(tmp_path / "r", steps=150, optimizer=optimizer))
    first = diagnosis.diagnoses[0].finding
    assert first.rule == "weight-decay-too-high" and first.evidence["optimizer"] == kind
    assert first.evidence["decay_budget"] >= 0.5 and first.evidence["shrink"] < 0.5
    assert "Lower weight_decay" in first.fix


@pytest.mark.parametrize("optimizer", [
    lambda p: O.SGD(p, lr=0.1, momentum=0.9, weight_decay=5e-4),
    lambda p: O.SGD(p, lr=0.1, momentum=0.9, weight_decay=5e-3),
    lambda p: O.AdamW(p, lr=1e-2, weight_decay=0.1),
    lambda p: O.Adam(p, lr=1e-3, weight_decay=1e-4),
])
def test_usual_decay_stays_quiet(tmp_path, optimizer):
    found = _diagnosis(train(tmp_path / "r", steps=150, optimizer=optimizer)).findings
    assert [f.rule for f in found] == []


def test_a_large_budget_under_which_the_loss_falls_stays_quiet(tmp_path):
    path = train(tmp_path / "r", steps=150,
                 optimizer=lambda p: O.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.02))
    run = tracelab.open_run(path)
    assert run.loss().iloc[-10:].median() < 0.5 * run.loss().iloc[0]  # it learns
    found = _diagnosis(path).findings
    assert "weight-decay-too-high" not in {f.rule for f in found}
