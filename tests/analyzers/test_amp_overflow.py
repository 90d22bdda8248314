"""amp-overflow: a collapsing loss scale or many skipped steps."""
import numpy as np
import pandas as pd

from tracelab.analyzers.amp_overflow import amp_overflow
from tracelab.core.run import Run


def _run(scale, skipped=None):
    rows = [{"step": i, "split": "train", "name": "amp/scale", "value": float(v)}
            for i, v in enumerate(scale)]
    if skipped is not None:
        rows += [{"step": i, "split": "train", "name": "amp/skipped", "value": float(v)}
                 for i, v in enumerate(skipped)]
    return Run.from_frames(signals=pd.DataFrame(rows))


def test_a_scale_that_collapses_is_an_error():
    [f] = amp_overflow(_run(65536.0 / 2.0 ** np.arange(60)))
    assert f.code == "TL605" and f.severity.value == "error" and "no scaling is left" in f.message
    assert "unscale_" in f.fix


def test_many_skipped_steps_at_a_steady_scale_warn():
    skipped = np.zeros(100)
    skipped[10::4] = 1
    [f] = amp_overflow(_run(np.full(100, 1024.0), skipped))
    assert f.severity.value == "warning" and f.evidence["skipped_steps"] == 23


def test_quiet_on_a_healthy_scaler():
    # A few skips while it finds its level, then growth every 20 steps with one skip after.
    scale = [65536.0, 32768.0, 16384.0] + [16384.0] * 97
    skipped = [0, 1, 1] + [0] * 97
    for at in range(23, 100, 20):
        skipped[at] = 1
    assert amp_overflow(_run(scale, skipped)) == []
    assert amp_overflow(_run(np.full(10, 1.0))) == []  # too short to judge
