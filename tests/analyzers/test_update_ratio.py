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


def _held_by(held: bool, optimizers=None):
    """_run's layers with their updates far too large, held by the optimizer or not."""
    run = _run({"fc2.weight": _ratio(0.4, 7)})
    meta = model_meta([(*p, True, held) for p in PARAMS])
    if optimizers is not None:
        meta["optimizers"] = optimizers
    return make_run(meta, tensors=[run.tensors])


def test_its_fix_presumes_an_optimizer_that_holds_the_layers():
    from tracelab.app.diagnose import diagnose
    run = _held_by(True)
    [d] = diagnose(run, update_ratio(run))[1]
    assert not d.contradicted and d.fix.startswith("Lower the learning rate")
    # An optimizer built over other parameters: its learning rate moves none of these.
    run = _held_by(False, {"0": {"type": "SGD", "groups": [{"lr": 1.0, "params": []}]}})
    [d] = diagnose(run, update_ratio(run))[1]
    assert d.contradicted and "no optimizer holds any of the model's 3 trained parameters" \
        in d.contradicted[0]
    assert d.fix.startswith("Probably not this:")


def test_without_the_optimizer_s_facts_it_says_what_to_pass():
    from tracelab.analyzers._learning_rate import LR_MOVES_THE_MODEL
    run = make_run(model_meta([(n, s, True, None) for n, s in PARAMS]))
    [f] = update_ratio(_run({"fc2.weight": _ratio(0.4, 7)}))
    verdict = LR_MOVES_THE_MODEL.judge(run, f)
    assert not verdict.contradicted and "pass Recorder(optimizer=...)" in verdict.missing
    # The parameters' in_optimizer flags decide it, the optimizer's summary aside.
    assert not any(LR_MOVES_THE_MODEL.judge(_run({}), f))


def test_tiny_updates_without_the_loss_s_input_say_to_record_it():
    from tracelab.app.diagnose import diagnose
    from tracelab.core.schema import Needs
    tiny = {name: np.full(N, 1e-7) for name, _ in PARAMS}
    run = _run(tiny)
    assert Needs.OUTPUTS not in run.available
    [d] = diagnose(run, update_ratio(run))[1]
    assert "not recorded: what enters the loss (softmax rows given to a loss that expects " \
           "logits also make the updates tiny); pass step(outputs=logits) to record it" in d.basis
    assert not d.contradicted and d.fix.startswith("Raise the learning rate")
    # A loss that reads no logits (MSE) needs no such fact; nor do updates too large.
    run = make_run({**model_meta(PARAMS), "loss_fn": {"type": "MSELoss"}}, tensors=[run.tensors])
    [d] = diagnose(run, update_ratio(run))[1]
    assert not any(b.startswith("not recorded") for b in d.basis)
    run = _run({"fc2.weight": _ratio(0.4, 7)})
    [d] = diagnose(run, update_ratio(run))[1]
    assert not any(b.startswith("not recorded") for b in d.basis)
