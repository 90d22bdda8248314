"""weights_unchanged: the one check of a parameter that never changed, shared by
frozen-parameters, optimizer-step-missing and param-not-in-optimizer."""
from dynamics_frames import make_run, tensor_rows

from tracelab.analyzers._dynamics import weights_unchanged


def _run(weights: dict, updates: dict | None = None):
    tensors = [tensor_rows("weight", weights)]
    if updates:
        tensors.append(tensor_rows("update", updates))
    return make_run(tensors=tensors)


def test_weight_statistics_judge_a_parameter_without_updates():
    run = _run({"a": {"norm": [2.0] * 4, "mean": [0.1] * 4, "min": [-1.0] * 4,
                      "max": [1.0] * 4},
                "b": {"norm": [2.0, 2.0, 2.0, 2.0], "mean": [0.1, 0.1, 0.1, 0.1],
                      "min": [-1.0] * 4, "max": [1.0, 1.0, 1.0, 1.2]}})
    assert weights_unchanged(run, "a") and not weights_unchanged(run, "b")


def test_only_the_norm_recorded_is_judged_from_the_norm_alone():
    run = _run({"a": {"norm": [2.0] * 4}, "b": {"norm": [2.0, 2.1, 2.2, 2.3]}})
    assert weights_unchanged(run, "a") and not weights_unchanged(run, "b")


def test_recorded_updates_decide_and_nothing_recorded_is_not_unchanged():
    run = _run({"a": {"norm": [2.0] * 4}, "b": {"norm": [2.0] * 4}},
               {"a": {"norm": [0.0] * 4}, "b": {"norm": [0.0, 1e-3, 0.0, 0.0]}})
    assert weights_unchanged(run, "a") and not weights_unchanged(run, "b")
    assert not weights_unchanged(run, "missing")
    assert not weights_unchanged(_run({"c": {"norm": [1.0]}}), "c")
