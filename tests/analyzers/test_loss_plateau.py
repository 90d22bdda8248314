"""loss-plateau: a loss that never decreases fires, with the hint its other signals support."""
import numpy as np
import pytest
from dynamics_frames import make_run, model_meta, noisy_decay, scalar_rows, tensor_rows

from tracelab.analyzers.loss_plateau import loss_plateau

N = 200
PARAMS = [("fc1.weight", (32, 8)), ("fc1.bias", (32,)), ("fc2.weight", (4, 32))]


def _flat(seed=0):
    return 1.386 + 0.02 * np.random.default_rng(seed).standard_normal(N)


def _stats(norm, n=N, **extra):
    return {"norm": np.broadcast_to(np.asarray(norm, dtype=float), (n,)).copy(),
            "numel": [256] * n, **extra}


def _weights(change=1e-3):
    t = np.arange(N)
    return tensor_rows("weight", {p: _stats(3.0 * (1 + change * t / N)) for p, _ in PARAMS})


def _grads(norm=0.5):
    return tensor_rows("grad", {p: _stats(norm) for p, _ in PARAMS})


def _updates(ratio):
    return tensor_rows("update", {p: _stats(3.0 * ratio) for p, _ in PARAMS})


def _run(loss, *tensors):
    return make_run(model_meta(PARAMS), scalars=[scalar_rows("loss", loss)], tensors=tensors)


def test_no_gradients_at_all_means_backward_was_never_called():
    [f] = loss_plateau(_run(_flat(), _weights(0.0)))
    assert f.code == "TL103" and f.severity.value == "error"
    assert "backward() was never called" in f.message and "none were recorded" in f.message
    assert "backward()" in f.fix and f.evidence["relative_drop"] < 0.03


def test_all_zero_gradients_mean_backward_was_never_called():
    [f] = loss_plateau(_run(_flat(), _weights(0.0), _grads(0.0)))
    assert f.severity.value == "error" and "all are zero" in f.message


def test_gradients_without_any_weight_change_mean_step_never_ran():
    [f] = loss_plateau(_run(_flat(), _weights(0.0), _grads(0.5), _updates(0.0)))
    assert f.severity.value == "error" and "optimizer.step() never ran" in f.message


def test_tiny_updates_mean_the_learning_rate_is_too_low():
    [f] = loss_plateau(_run(_flat(), _weights(), _grads(0.5), _updates(1e-8)))
    assert f.severity.value == "warning" and "learning rate is far too low" in f.message
    assert f.evidence["update_ratio"] == pytest.approx(1e-8, rel=1e-2)


def test_zero_gradients_in_most_layers_point_to_dead_units():
    grads = tensor_rows("grad", {"fc1.weight": _stats(0.0), "fc1.bias": _stats(0.0),
                                 "fc2.weight": _stats(0.0), "fc2.bias": _stats(0.3)})
    [f] = loss_plateau(_run(_flat(), _weights(), grads, _updates(1e-3)))
    assert "dead-units" in f.message and f.evidence["zero_grad_layers"] == 2


def test_vanishing_gradients_are_named():
    grads = tensor_rows("grad", {"fc1.weight": _stats(1e-9), "fc2.weight": _stats(0.5)})
    [f] = loss_plateau(_run(_flat(), _weights(), grads, _updates(1e-3)))
    assert "gradients vanish" in f.message


def test_large_updates_mean_the_learning_rate_is_too_high():
    [f] = loss_plateau(_run(_flat(), _weights(), _grads(0.5), _updates(0.5)))
    assert "too high" in f.message


def test_ordinary_signals_point_to_labels_and_inputs():
    [f] = loss_plateau(_run(_flat(), _weights(), _grads(0.5), _updates(1e-3)))
    assert f.severity.value == "warning" and "labels" in f.message


def test_loss_alone_still_fires_with_a_generic_hint():
    [f] = loss_plateau(make_run(scalars=[scalar_rows("loss", _flat())]))
    assert f.severity.value == "warning" and "no gradients or weights" in f.message


@pytest.mark.parametrize("seed", range(4))
def test_quiet_on_a_converging_run_with_noise(seed):
    run = _run(noisy_decay(N, noise=0.3, seed=seed), _weights(), _grads(), _updates(1e-3))
    assert loss_plateau(run) == []


def test_quiet_on_a_rising_loss_and_on_a_short_run():
    rising = np.linspace(1.4, 9.0, N)
    assert loss_plateau(_run(rising)) == []
    assert loss_plateau(_run(_flat()[:20])) == []
