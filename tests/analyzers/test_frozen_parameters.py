"""frozen-parameters: trainable parameters that never change, with their cause."""
import numpy as np
from dynamics_frames import make_run, model_meta, tensor_rows

from tracelab.analyzers.frozen_parameters import frozen_parameters

N = 50


def _moving(seed):
    rng = np.random.default_rng(seed)
    return {"norm": 3 + np.cumsum(0.01 * rng.standard_normal(N)),
            "mean": 0.01 * rng.standard_normal(N), "min": [-1.0] * N, "max": [1.0] * N}


def _still(norm=2.0):
    return {"norm": [norm] * N, "mean": [0.001] * N, "min": [-0.5] * N, "max": [0.5] * N}


def _grads(**levels):
    return tensor_rows("grad", {name: {"norm": [level] * N} for name, level in levels.items()})


PARAMS = ["enc.weight", "enc.bias", "head.weight", "head.bias"]


def _run(still=(), params=None, grads=None):
    params = params or [(p, (8, 8) if p.endswith("weight") else (8,)) for p in PARAMS]
    weights = tensor_rows("weight", {name: _still() if name in still else _moving(i)
                                     for i, name in enumerate(p[0] for p in params)})
    tensors = [weights] + ([grads] if grads is not None else [])
    return make_run(model_meta(params), tensors=tensors)


def test_parameters_left_out_of_the_optimizer():
    params = [("enc.weight", (8, 8)), ("enc.bias", (8,)), ("head.weight", (4, 8), True, False),
              ("head.bias", (4,), True, False)]
    grads = _grads(**{p: 0.5 for p in PARAMS})
    [f] = frozen_parameters(_run({"head.weight", "head.bias"}, params, grads))
    assert f.code == "TL205" and f.severity.value == "warning" and f.subject == "head"
    assert "head.weight, head.bias require grad" in f.message
    assert "optimizer's param groups do not hold them" in f.message
    assert f.evidence["parameters"] == 2 and f.evidence["changing_parameters"] == 2


def test_parameters_without_gradients_are_unused_or_detached():
    grads = _grads(**{"enc.weight": 0.5, "enc.bias": 0.1})  # head got None gradients
    [f] = frozen_parameters(_run({"head.weight", "head.bias"}, grads=grads))
    assert "never recorded (None)" in f.message and "detached" in f.fix


def test_zero_gradients_are_named():
    grads = _grads(**{"enc.weight": 0.5, "enc.bias": 0.1, "head.weight": 0.0, "head.bias": 0.0})
    [f] = frozen_parameters(_run({"head.weight", "head.bias"}, grads=grads))
    assert f.severity.value == "warning" and "are zero" in f.message
    assert "Parameters head.weight, head.bias require grad" in f.message


def test_zero_gradients_beside_a_training_parameter_of_the_module_are_only_info():
    grads = _grads(**{"enc.weight": 0.5, "enc.bias": 0.1, "head.weight": 0.5, "head.bias": 0.0})
    [f] = frozen_parameters(_run({"head.bias"}, grads=grads))
    assert f.severity.value == "info" and "exactly zero, not None" in f.message
    # ... unless a whole module gets zero gradients: the gradient is blocked (dead units)
    grads = _grads(**{"enc.weight": 0.0, "enc.bias": 0.0, "head.weight": 0.0, "head.bias": 0.1})
    [f] = frozen_parameters(_run({"enc.weight", "enc.bias", "head.weight"}, grads=grads))
    assert f.severity.value == "warning" and "enc.weight, enc.bias, head.weight" in f.message


def test_nonzero_gradients_point_to_a_zero_learning_rate():
    grads = _grads(**{p: 0.5 for p in PARAMS})
    [f] = frozen_parameters(_run({"head.weight"}, grads=grads))
    assert "learning rate is zero" in f.message


def test_negligible_gradients_are_only_info():
    grads = _grads(**{"enc.weight": 0.5, "enc.bias": 1e-9, "head.weight": 0.5, "head.bias": 0.1})
    [f] = frozen_parameters(_run({"enc.bias"}, grads=grads))
    assert f.severity.value == "info" and "normalization layer" in f.message


def test_zero_updates_count_as_frozen_even_if_stats_wobble():
    updates = tensor_rows("update", {"enc.weight": {"norm": [0.0] * N},
                                     "head.weight": {"norm": [0.01] * N}})
    grads = _grads(**{p: 0.5 for p in PARAMS})
    run = make_run(model_meta([(p, (8, 8)) for p in PARAMS]), tensors=[
        tensor_rows("weight", {p: _moving(i) for i, p in enumerate(PARAMS)}), grads, updates])
    [f] = frozen_parameters(run)
    assert f.subject == "enc" and "enc.weight" in f.message


def test_quiet_on_intentionally_frozen_parameters():
    params = [("enc.weight", (8, 8), False), ("enc.bias", (8,), False), ("head.weight", (4, 8)),
              ("head.bias", (4,))]
    assert frozen_parameters(_run({"enc.weight", "enc.bias"}, params)) == []


def test_quiet_when_everything_moves_or_nothing_does():
    assert frozen_parameters(_run()) == []
    assert frozen_parameters(_run(set(PARAMS))) == []  # loss-plateau names that cause


def test_without_a_model_summary_only_parameters_with_gradients_are_judged():
    weights = tensor_rows("weight", {"a.weight": _still(), "b.weight": _moving(1),
                                     "c.weight": _still()})
    grads = _grads(**{"a.weight": 0.5, "b.weight": 0.5})
    [f] = frozen_parameters(make_run(tensors=[weights, grads]))
    assert f.subject == "a"
