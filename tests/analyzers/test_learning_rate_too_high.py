"""learning-rate-too-high: named from the symptoms other rules found, when two of them agree."""
import pandas as pd

from tracelab.analyzers.learning_rate_too_high import learning_rate_too_high
from tracelab.core.causes import Chain
from tracelab.core.findings import WARNING, Finding
from tracelab.core.run import Run


def _run(lr=None, updates=None):
    """A run with a train loss, optionally an LR schedule and a layer's update ratio."""
    frames = [pd.DataFrame({"step": range(300), "split": "train", "name": "loss", "value": 1.0})]
    if lr is not None:
        frames.append(pd.DataFrame({"step": range(300), "split": "train", "name": "lr/0",
                                    "value": lr}))
    tensors = None
    if updates is not None:
        n = len(updates)
        rows = [{"step": s, "kind": kind, "name": "0.weight", "norm": value}
                for s in range(n) for kind, value in (("update", updates[s]), ("weight", 1.0))]
        tensors = pd.DataFrame(rows)
    meta = {"model": {"parameters": [{"name": "0.weight", "shape": [4, 4]}]}}
    return Run.from_frames(meta, scalars=pd.concat(frames, ignore_index=True), tensors=tensors)


def _f(rule, steps, evidence, subject="loss"):
    return Finding(rule, "TL999", WARNING, subject, steps, f"{rule}.", evidence, "fix it")


def _alone(*findings):
    return [Chain(f, ()) for f in findings]


def test_fires_when_swings_and_large_updates_agree_and_names_the_factor():
    swings = _f("loss-oscillation", (100, 299), {"p10": 0.9, "p90": 4.7})
    updates = _f("update-ratio", (0, 299), {"worst_ratio": 0.14}, "0.weight")
    [f] = learning_rate_too_high(_run(lr=0.5), _alone(swings, updates))
    assert f.rule == "learning-rate-too-high" and f.code == "TL208"
    assert f.steps == (0, 299) and f.evidence["votes"] == ["oscillation", "updates"]
    assert "peaks at 0.5 in 'lr/0'" in f.message and f.fix.startswith("Lower the learning rate")
    assert f.evidence["symptoms"] == [swings.id, updates.id]


def test_a_spike_right_after_the_lr_rose_points_at_the_schedule():
    rise = _f("loss-spike", (150, 160), {"cause": "lr_increase", "step": 150, "lr_ratio": 10.0})
    dead = _f("dead-units", (150, 299), {"dead_frac": 0.8}, "3")
    [f] = learning_rate_too_high(_run(), _alone(rise, dead))
    assert f.evidence["votes"] == ["dead", "lr_rise"]
    assert f.fix.startswith("Check the learning-rate schedule at step 150: it rose 10x")


def test_the_fastest_layer_s_early_updates_count_without_an_update_ratio_finding():
    swings = _f("loss-oscillation", (100, 299), {"p10": 0.9, "p90": 4.7})
    early = [0.5] * 10 + [1e-3] * 40  # 500x the usual 1e-3 in the first 10 steps
    [f] = learning_rate_too_high(_run(updates=early), _alone(swings))
    assert "updates" in f.evidence["votes"] and "median of the first 10 steps" in f.message
    assert learning_rate_too_high(_run(updates=early), _alone(swings), far_above=1000.0) == []


def test_quiet_on_one_signal_or_on_symptoms_an_input_explains():
    spike = _f("loss-spike", (150, 160), {"cause": "unprofiled", "spikes_total": 1})
    burst = _f("exploding-gradients", (150, 200), {"peak_norm": 40.0}, "0.weight")
    assert learning_rate_too_high(_run(), [Chain(spike, (burst,))]) == []  # no optimization vote
    bad_batch = _f("loss-spike", (150, 160), {"cause": "input_outlier", "spikes_total": 3})
    nan_input = _f("nonfinite-values", (150, 299), {"source": "input"}, "x")
    assert learning_rate_too_high(_run(), _alone(bad_batch, nan_input)) == []
    low = _f("update-ratio", (0, 299), {"worst_ratio": 1e-7}, "0.weight")
    swings = _f("loss-oscillation", (100, 299), {"p10": 0.9, "p90": 4.7})
    assert learning_rate_too_high(_run(), _alone(swings, low)) == []  # tiny updates: no vote
    assert learning_rate_too_high(_run(), []) == []
