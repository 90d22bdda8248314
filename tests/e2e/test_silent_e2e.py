"""End to end: the silent bugs of benchmarks/calibration_silent.py, planted in tiny real
trainings, are named by their rule with the right fix; the healthy runs stay quiet."""
from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")

import tracelab  # noqa: E402
from _benchmarks import load  # noqa: E402

silent = load("calibration_silent")

pytestmark = pytest.mark.usefixtures("one_thread")


def _run(tmp_path, name, steps=120):
    diagnosis = tracelab.analyze(silent.train(name, tmp_path / name, steps=steps))
    assert not diagnosis.errors, diagnosis.errors
    verdict, alarming = silent.judge(name, diagnosis)
    assert verdict == "ok", (verdict, [f.message for f in diagnosis.findings])
    return {f.rule: f for f in diagnosis.findings}


def test_a_corrupt_batch_off_the_profile_cadence_is_named(tmp_path):
    spike = _run(tmp_path, "silent-corrupt-batch")["loss-spike"]
    assert spike.steps[0] == 63 and "outlier input batch, 'input'" in spike.message
    assert "Filter or clip outlier" in spike.fix


def test_the_first_nan_is_traced_to_its_batch_on_any_step(tmp_path):
    found = _run(tmp_path, "silent-nan-batch")["nonfinite-values"]
    assert found.steps[0] == 63 and "train input batch 'input' (1 NaN" in found.message


@pytest.mark.parametrize("name", ["silent-target-leak", "silent-loss-on-wrong-tensor"])
def test_a_loss_that_collapses_is_named(tmp_path, name):
    found = _run(tmp_path, name)["loss-collapse"]
    assert "leaked into the inputs" in found.message and "val loss collapsed too" in found.message


@pytest.mark.parametrize("name,steps", [("silent-mlp-adam", 120), ("silent-cnn-sgd", 150),
                                        ("silent-gru-adam", 120),
                                        ("silent-regression-adam", 120)])
def test_healthy_runs_stay_quiet(tmp_path, name, steps):
    _run(tmp_path, name, steps)


def test_a_missing_zero_grad_is_named_first(tmp_path):
    diagnosis = tracelab.analyze(silent.train("silent-no-zero-grad", tmp_path / "r", steps=80))
    first = diagnosis.findings[0]
    assert first.rule == "missing-zero-grad" and "optimizer.zero_grad()" in first.fix


def test_legitimate_gradient_accumulation_stays_quiet(tmp_path):
    found = _run(tmp_path, "silent-mlp-sgd-accumulate", 80)
    assert "missing-zero-grad" not in found


def test_validation_in_train_mode_is_named(tmp_path):
    found = _run(tmp_path, "silent-eval-in-train-mode", 100)["eval-in-train-mode"]
    assert "4 of 4 evaluations of split 'val'" in found.message and "model.eval()" in found.fix


def test_dropout_and_batchnorm_models_evaluated_properly_stay_quiet(tmp_path):
    for name in ("silent-dropout-adam", "silent-cnn-sgd"):
        assert "eval-in-train-mode" not in _run(tmp_path, name, 100)


@pytest.mark.parametrize("name,needle", [
    ("silent-bce-minus-one", "{-1, 1}"), ("silent-sorted-labels", "not shuffled"),
    ("silent-regression-scale", "far from unit scale")])
def test_target_problems_are_named(tmp_path, name, needle):
    assert needle in _run(tmp_path, name, 100)["target-problems"].message


def test_imbalanced_binary_labels_are_information(tmp_path):
    found = _run(tmp_path, "silent-imbalanced", 100)["target-problems"]
    assert found.severity.value == "info"


def test_an_overflowing_loss_scale_is_named_and_healthy_amp_stays_quiet(tmp_path):
    found = _run(tmp_path, "silent-amp-overflow", 80)["amp-overflow"]
    assert "GradScaler skipped" in found.message
    assert "amp-overflow" not in _run(tmp_path, "silent-mlp-amp", 80)


def test_validation_rows_cut_from_the_training_pool_are_named(tmp_path):
    found = _run(tmp_path, "silent-train-val-overlap", 100)["train-val-overlap"]
    assert found.subject == "val" and found.evidence["overlap_share"] > 0.2
    assert "train-val-overlap" not in _run(tmp_path, "silent-binary-features", 100)
