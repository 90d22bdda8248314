"""collapsed-outputs: the final module's outputs span a tiny range."""
import numpy as np
from dynamics_frames import make_run, tensor_rows

from tracelab.analyzers.collapsed_outputs import collapsed_outputs

STEPS = list(range(0, 300, 10))


def _run(head_range, hidden_range=3.0):
    n = len(STEPS)
    half = np.asarray(head_range, dtype=float) / 2
    per = {"fc1": {"min": [-hidden_range / 2] * n, "max": [hidden_range / 2] * n},
           "head": {"min": 0.3 - half * np.ones(n), "max": 0.3 + half * np.ones(n)}}
    return make_run(tensors=[tensor_rows("activation", per, steps=STEPS)])


def test_fires_when_the_logits_collapse():
    ranges = np.concatenate([np.linspace(2.0, 0.01, 10), np.full(len(STEPS) - 10, 0.004)])
    [f] = collapsed_outputs(_run(ranges))
    assert f.code == "TL207" and f.severity.value == "warning" and f.subject == "head"
    assert f.evidence["range"] < 0.1 and f.evidence["range_start"] == 2.0
    assert "final module 'head'" in f.message


def test_quiet_on_spread_outputs_even_if_a_hidden_layer_is_narrow():
    assert collapsed_outputs(_run(np.full(len(STEPS), 4.0), hidden_range=0.001)) == []


def test_quiet_on_a_zero_initialized_head_that_learns():
    assert collapsed_outputs(_run(np.linspace(0.0, 3.0, len(STEPS)))) == []


def test_threshold_is_configurable():
    assert collapsed_outputs(_run(np.full(len(STEPS), 0.05)), min_range=0.01) == []
