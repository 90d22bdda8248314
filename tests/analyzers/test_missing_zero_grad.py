"""missing-zero-grad: gradients left over from the previous optimizer step."""
import numpy as np
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
