"""exploding-gradients: sustained huge or fast-growing gradient norms per layer, named."""
import numpy as np
import pytest
from dynamics_frames import make_run, model_meta, tensor_rows

from tracelab.analyzers.exploding_gradients import exploding_gradients

N = 100
LAYERS = [("l0.weight", (64, 64)), ("l0.bias", (64,)), ("l1.weight", (64, 64)),
          ("l2.weight", (64, 64)), ("l3.weight", (4, 64))]


def _noisy(level, seed, n=N, noise=0.3):
    return level * np.exp(noise * np.random.default_rng(seed).standard_normal(n))


def _run(levels: dict, meta=True):
    per = {name: {"norm": values if isinstance(values, np.ndarray) else _noisy(values, i),
                  "numel": [4096] * N} for i, (name, values) in enumerate(levels.items())}
    return make_run(model_meta(LAYERS) if meta else None, tensors=[tensor_rows("grad", per)])


HEALTHY = {"l0.weight": 0.3, "l0.bias": 0.05, "l1.weight": 0.5, "l2.weight": 0.8,
           "l3.weight": 1.2}


def test_exploding_names_a_growing_layer_and_its_ratio_to_the_others():
    growing = 0.2 * np.exp(np.linspace(0, np.log(5000), N))  # 0.2 -> 1000
    [f] = exploding_gradients(_run({**HEALTHY, "l2.weight": growing}))
    assert f.code == "TL202" and f.severity.value == "warning" and f.subject == "l2.weight"
    assert f.evidence["peak_norm"] > 500 and f.evidence["growth"] > 1000
    assert f.evidence["ratio_to_other_layers"] > 100
    assert "'l2.weight'" in f.message and "median of the other layers" in f.message


def test_exploding_fires_on_a_sustained_huge_norm():
    [f] = exploding_gradients(_run({**HEALTHY, "l0.weight": 300.0}))
    assert f.subject == "l0.weight" and f.evidence["peak_norm"] > 100


@pytest.mark.parametrize("seed", range(3))
def test_exploding_quiet_on_healthy_noisy_gradients(seed):
    levels = {n: _noisy(v, seed * 10 + i, noise=0.5) * np.linspace(1, 3, N)
              for i, (n, v) in enumerate(HEALTHY.items())}
    assert exploding_gradients(_run(levels)) == []


def test_exploding_quiet_on_a_single_bad_batch():
    spiky = _noisy(0.3, 5)
    spiky[50] = 1e4
    assert exploding_gradients(_run({**HEALTHY, "l0.weight": spiky})) == []


def test_exploding_quiet_on_growth_from_a_tiny_start():
    growing = 1e-5 * np.exp(np.linspace(0, np.log(3e4), N))  # 1e-5 -> 0.3
    assert exploding_gradients(_run({**HEALTHY, "l3.weight": growing})) == []


def test_exploding_ignores_nonfinite_norms():
    blown = _noisy(0.3, 6)
    blown[60:] = np.nan
    assert exploding_gradients(_run({**HEALTHY, "l1.weight": blown})) == []
