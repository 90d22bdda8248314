"""train-in-eval-mode: training steps taken in eval mode by a model whose Dropout or BatchNorm
the mode changes; real tiny trainings, and frames for swapped modes."""
import pandas as pd
import pytest

from tracelab.analyzers.train_in_eval_mode import train_in_eval_mode
from tracelab.core.run import Run

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
nn = torch.nn

import tracelab  # noqa: E402
from _contract_runs import blobs, train  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _model(dropout: bool = True, norm: bool = True) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), *([nn.BatchNorm1d(32)] if norm else []), nn.ReLU(),
                         *([nn.Dropout(0.3)] if dropout else []), nn.Linear(32, 4))


def _findings(path, rule="train-in-eval-mode"):
    diagnosis = tracelab.analyze(path)
    assert not diagnosis.errors, diagnosis.errors
    return [f for f in diagnosis.findings if f.rule == rule]


def test_model_eval_for_validation_never_undone_fires(tmp_path):
    ce = nn.CrossEntropyLoss()
    path = train(tmp_path / "r", _model(), blobs(2048), ce, loss_fn=ce, val_every=20)
    [f] = _findings(path)
    assert f.code == "TL609" and f.severity.value == "error" and f.evidence["first_step"] == 20
    assert "40 of 40 training steps ran with 0 of 1 Dropout and 0 of 1 BatchNorm" in f.message
    assert "model.train() was not called again" in f.message and "model.train()" in f.fix
    assert _findings(path, "eval-in-train-mode") == []


def test_model_train_after_each_validation_stays_quiet(tmp_path):
    ce = nn.CrossEntropyLoss()
    path = train(tmp_path / "r", _model(), blobs(2048), ce, val_every=20,
                 after_val=lambda model: model.train())
    assert _findings(path) == []


def test_a_model_without_dropout_or_batchnorm_stays_quiet_in_eval_mode(tmp_path):
    ce = nn.CrossEntropyLoss()
    path = train(tmp_path / "r", _model(dropout=False, norm=False), blobs(2048), ce, val_every=20)
    assert _findings(path) == []


def test_batchnorm_frozen_on_purpose_for_fine_tuning_stays_quiet(tmp_path):
    model = _model(dropout=False)
    norm = model[1]
    for p in norm.parameters():
        p.requires_grad_(False)

    def frozen(model):
        model.train()
        norm.eval()
    frozen(model)
    ce = nn.CrossEntropyLoss()
    path = train(tmp_path / "r", model, blobs(2048), ce, val_every=20, after_val=frozen)
    assert _findings(path) == []


def _frames(train_modes, *, val_dropout=0.0, n_drop=1):
    rows = []
    for step, on in enumerate(train_modes):
        for name, value in (("train_mode/model", on), ("train_mode/dropout", on * n_drop),
                            ("train_mode/batchnorm", 0.0)):
            rows.append({"step": step, "split": "train", "name": name, "value": float(value)})
    for step in range(9, len(train_modes), 10):
        for name, value in (("train_mode/model", 1.0), ("train_mode/dropout", val_dropout),
                            ("train_mode/batchnorm", 0.0), ("modules/dropout", n_drop),
                            ("modules/batchnorm", 0.0)):
            rows.append({"step": step, "split": "val", "name": name, "value": float(value)})
    loss = pd.DataFrame({"step": range(len(train_modes)), "split": "train", "name": "loss",
                         "value": 1.0})
    return Run.from_frames(signals=pd.DataFrame(rows), scalars=loss)


def test_swapped_modes_are_named_as_one_defect():
    [f] = train_in_eval_mode(_frames([0] * 50, val_dropout=1.0))
    assert "swapped" in f.message and f.fix.startswith("Swap them")
    assert f.evidence["first_step"] == 0 and f.evidence["evaluations_in_train_mode"]
    # eval-in-train-mode sees the other half of the same swap: one diagnosis, this fix
    first = tracelab.analyze(_frames([0] * 50, val_dropout=1.0)).diagnoses[0]
    assert first.finding.rule == "train-in-eval-mode"
    assert "eval-in-train-mode" in [f.rule for f in first.explains]


def test_a_few_steps_in_eval_mode_stay_quiet():
    assert train_in_eval_mode(_frames([1] * 20 + [0] * 3 + [1] * 27)) == []
    assert train_in_eval_mode(_frames([0] * 50, n_drop=0)) == []


def test_eval_mode_until_the_next_epochs_model_train_fires():
    # validation mid-epoch without model.train() after it; the next epoch calls it again
    [f] = train_in_eval_mode(_frames(([1] * 20 + [0] * 10) * 3))
    assert f.evidence["first_step"] == 20 and f.evidence["longest"] == 10
    assert "until model.train() was called again" in f.message
