"""dead-units: ReLU layers whose units never fire; other activations and NaN rows are ignored."""
import numpy as np
from dynamics_frames import make_run, model_meta, tensor_rows

from tracelab.analyzers.dead_units import dead_units

STEPS = list(range(0, 300, 10))  # activations every 10 steps
MODULES = [("fc1", "Linear"), ("act1", "ReLU"), ("fc2", "Linear"), ("act2", "LeakyReLU"),
           ("head", "Linear")]


def _frac(level_from, level_to, seed=0):
    rng = np.random.default_rng(seed)
    values = np.linspace(level_from, level_to, len(STEPS)) + 0.02 * rng.standard_normal(len(STEPS))
    return np.clip(values, 0, 1)


def _run(per_module, nan_from=None):
    n = len(STEPS)
    per = {}
    for name, _ in MODULES:
        dead = per_module.get(name, _frac(0.05, 0.05, len(per)))
        nan = np.zeros(n, dtype=np.int64)
        if nan_from is not None:
            nan[nan_from:] = 10
        per[name] = {"dead_frac": dead, "nan_count": nan, "inf_count": [0] * n}
    return make_run(model_meta(modules=MODULES),
                    tensors=[tensor_rows("activation", per, steps=STEPS)])


def test_fires_on_a_relu_layer_that_died_during_training():
    [f] = dead_units(_run({"act1": _frac(0.05, 0.9)}))
    assert f.code == "TL203" and f.severity.value == "warning" and f.subject == "act1"
    assert f.evidence["dead_frac"] > 0.75 and f.evidence["dead_frac_first"] < 0.1
    assert "(ReLU)" in f.message and f.steps[1] == STEPS[-1]


def test_a_fully_dead_layer_is_an_error():
    [f] = dead_units(_run({"act1": np.ones(len(STEPS))}))
    assert f.severity.value == "error" and f.evidence["dead_frac"] == 1.0


def test_quiet_on_healthy_sparsity_and_on_leaky_relu():
    assert dead_units(_run({"act1": _frac(0.1, 0.3)})) == []
    assert dead_units(_run({"act2": np.ones(len(STEPS))})) == []  # LeakyReLU passes negatives


def test_recordings_holding_nan_are_ignored():
    # After a NaN every output reads as "not > 0": that is nonfinite-values' business.
    dead = _frac(0.05, 0.05)
    dead[15:] = 1.0
    assert dead_units(_run({"act1": dead}, nan_from=15)) == []


def test_quiet_without_enough_recordings():
    run = make_run(model_meta(modules=[("act", "ReLU")]), tensors=[tensor_rows(
        "activation", {"act": {"dead_frac": [1.0, 1.0]}}, steps=[0, 10])])
    assert dead_units(run) == []
