"""End to end: train tiny real models with the Recorder, analyze them, assert on the findings.

The scenarios are those of benchmarks/calibration_synthetic.py (the calibration of the
training-dynamics rules), shortened so each trains in a few seconds on a CPU.
"""
from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")

import tracelab  # noqa: E402
from _benchmarks import load  # noqa: E402

calibrate = load("calibration_synthetic")


pytestmark = pytest.mark.usefixtures("one_thread")


def _analyze(tmp_path, name, steps):
    run_dir = calibrate.train(name, tmp_path / name, steps=steps)
    diagnosis = tracelab.analyze(run_dir)
    assert not diagnosis.errors, diagnosis.errors
    return diagnosis


def _alarms(diagnosis):
    return {f.rule: f for f in diagnosis.findings if f.severity.value != "info"}


@pytest.mark.parametrize("name,steps", [("mlp-adam", 200), ("cnn-sgd", 150),
                                        ("gru-adam", 200)])
def test_healthy_runs_raise_no_warning(tmp_path, name, steps):
    diagnosis = _analyze(tmp_path, name, steps)
    assert _alarms(diagnosis) == {}, [f.message for f in diagnosis.findings]


def test_backward_never_called(tmp_path):
    found = _alarms(_analyze(tmp_path, "mlp-sgd-no-backward", 100))
    plateau = found["loss-plateau"]
    assert plateau.severity.value == "error" and "backward() was never called" in plateau.message


def test_layer_left_out_of_the_optimizer(tmp_path):
    diagnosis = _analyze(tmp_path, "mlp-adam-frozen-layer", 100)
    found = _alarms(diagnosis)
    assert set(found) == {"frozen-parameters", "param-not-in-optimizer"}
    frozen = found["frozen-parameters"]
    assert frozen.subject == "2" and "optimizer's param groups do not hold them" in frozen.message
    first = diagnosis.diagnoses[0]
    assert first.finding.rule == "param-not-in-optimizer" and first.finding.subject == "2"
    assert frozen in first.explains


def test_deep_sigmoid_net_has_vanishing_gradients(tmp_path):
    found = _alarms(_analyze(tmp_path, "sigmoid10-sgd", 100))
    assert found["vanishing-gradients"].subject.startswith("0.weight")
    assert set(found) <= calibrate.SCENARIOS["sigmoid10-sgd"].expect | \
        calibrate.SCENARIOS["sigmoid10-sgd"].allow


def test_learning_rate_too_high_oscillates(tmp_path):
    found = _alarms(_analyze(tmp_path, "tanh-sgd-lr-too-high", 200))
    assert "loss-oscillation" in found


def test_learning_rate_too_low(tmp_path):
    found = _alarms(_analyze(tmp_path, "mlp-sgd-lr-too-low", 100))
    assert "far too low" in found["loss-plateau"].message
    assert "too small in all 3 layers" in found["update-ratio"].message


def test_outlier_batch_spike_is_attributed_to_the_inputs(tmp_path):
    found = _alarms(_analyze(tmp_path, "mlp-adam-outlier-batch", 200))
    assert set(found) == {"loss-spike"}
    spike = found["loss-spike"]
    assert spike.steps[0] == 100 and "outlier input batch" in spike.message


def test_nan_batch_is_traced_to_the_input_feature(tmp_path):
    found = _alarms(_analyze(tmp_path, "mlp-adam-nan-input", 60))
    first = found["nonfinite-values"]
    assert first.severity.value == "error" and first.subject == "feature[3]"
    assert first.evidence["step"] == 30


def test_dying_relu(tmp_path):
    found = _alarms(_analyze(tmp_path, "mlp-sgd-dying-relu", 100))
    assert found["dead-units"].severity.value == "error"
