"""vanishing-gradients: layers starved of gradient against the largest layer, named."""
import numpy as np
import pytest
from dynamics_frames import GRAD_LEVELS, grad_run, noisy

from tracelab.analyzers.vanishing_gradients import vanishing_gradients

N = 100
HEALTHY = GRAD_LEVELS


def test_vanishing_names_the_starved_layers_with_their_ratio():
    [f] = vanishing_gradients(grad_run({**HEALTHY, "l0.weight": 1e-6, "l1.weight": 1e-4}))
    assert f.code == "TL201" and f.severity.value == "warning"
    assert f.subject == "l0.weight (+1 more)" and f.evidence["layers"] == 2
    assert "'l0.weight'" in f.message and "largest layer 'l3.weight'" in f.message
    assert f.evidence["ratio_to_largest"] == pytest.approx(1e-6 / 1.2, rel=0.5)


def test_vanishing_quiet_on_healthy_layers_and_ignores_biases():
    assert vanishing_gradients(grad_run(HEALTHY)) == []
    assert vanishing_gradients(grad_run({**HEALTHY, "l0.bias": 1e-9})) == []


def test_vanishing_leaves_exactly_zero_gradients_to_frozen_parameters():
    zeros = np.zeros(N)
    assert vanishing_gradients(grad_run({**HEALTHY, "l0.weight": zeros})) == []


def test_vanishing_without_a_model_summary_uses_names():
    [f] = vanishing_gradients(grad_run({**HEALTHY, "l0.weight": 1e-7}, meta=False))
    assert f.subject == "l0.weight"


def test_quiet_when_the_gap_comes_from_an_exploding_layer():
    exploding = 0.5 * np.exp(np.linspace(0, 30, N))  # 0.5 -> 5e12, then NaN
    exploding[80:] = np.nan
    assert vanishing_gradients(grad_run({**HEALTHY, "l3.weight": exploding,
                                     "l1.weight": 0.01})) == []


def test_judged_up_to_the_first_nonfinite_gradient():
    starved = np.full(N, 1e-7)
    healthy_then_nan = noisy(1.2, 9)
    healthy_then_nan[90:] = np.nan
    [f] = vanishing_gradients(grad_run({**HEALTHY, "l0.weight": starved,
                                    "l3.weight": healthy_then_nan}))
    assert f.subject == "l0.weight" and f.steps == (0, 89)
