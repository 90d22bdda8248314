"""update-ratio: ||update|| / ||weight|| per layer far above or below about 1e-3."""
import numpy as np
import pytest
from dynamics_frames import make_run, model_meta, tensor_rows

from tracelab.analyzers.update_ratio import update_ratio

N = 200
PARAMS = [("fc1.weight", (64, 20)), ("fc1.bias", (64,)), ("fc2.weight", (4, 64))]


def _ratio(level, seed, noise=0.5):
    return level * np.exp(noise * np.random.default_rng(seed).standard_normal(N))


def _run(ratios: dict):
    weights, updates = {}, {}
    for i, (name, _) in enumerate(PARAMS):
        w = 2.0 + 0.1 * i
        weights[name] = {"norm": [w] * N}
        r = ratios.get(name, _ratio(1e-3, i))
        updates[name] = {"norm": w * (r if isinstance(r, np.ndarray) else np.full(N, r))}
    return make_run(model_meta(PARAMS), tensors=[tensor_rows("weight", weights),
                                                 tensor_rows("update", updates)])


def test_fires_when_updates_are_too_large():
    [f] = update_ratio(_run({"fc2.weight": _ratio(0.4, 7)}))
    assert f.code == "TL206" and f.severity.value == "warning" and f.subject == "fc2.weight"
    assert "too large in 1 of 2 layers" in f.message and f.evidence["worst_ratio"] > 0.1
    assert "Lower the learning rate" in f.fix


def test_fires_once_when_every_layer_barely_moves():
    [f] = update_ratio(_run({"fc1.weight": _ratio(1e-7, 1), "fc2.weight": _ratio(3e-7, 2)}))
    assert "too small in all 2 layers" in f.message and f.subject == "fc1.weight (+1 more)"
    assert f.evidence["worst_ratio"] < 1e-5 and "Raise the learning rate" in f.fix


@pytest.mark.parametrize("level", [1e-4, 1e-3, 1e-2])
def test_quiet_on_ordinary_ratios(level):
    run = _run({"fc1.weight": _ratio(level, 3), "fc2.weight": _ratio(level, 4)})
    assert update_ratio(run) == []


def test_quiet_on_a_converged_run_whose_updates_shrink():
    shrinking = np.geomspace(3e-3, 1e-9, N)  # healthy start, converged end
    assert update_ratio(_run({"fc1.weight": shrinking, "fc2.weight": shrinking})) == []


def test_ignores_biases_and_never_moving_layers():
    assert update_ratio(_run({"fc1.bias": _ratio(1.0, 5), "fc1.weight": np.zeros(N)})) == []
