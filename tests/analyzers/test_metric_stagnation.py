"""metric-stagnation: a validation accuracy flat at chance fires; learning or top-k stays quiet."""
import numpy as np
import pytest
from dynamics_frames import make_run, model_meta, scalar_rows

from tracelab.analyzers.metric_stagnation import metric_stagnation

STEPS = list(range(49, 1000, 50))


def _acc(level, noise=0.004, seed=0, n=len(STEPS)):
    rng = np.random.default_rng(seed)
    return level + noise * rng.standard_normal(n)


def _run(values, meta=None, name="acc", split="val"):
    return make_run(meta, scalars=[scalar_rows("loss", np.linspace(1, 0.5, 1000)),
                                   scalar_rows(name, values, split=split, steps=STEPS)])


def test_binary_task_at_half_from_the_config_is_an_error():
    [f] = metric_stagnation(_run(_acc(0.5001), {"config": {"num_classes": 2}}))
    assert f.code == "TL106" and f.severity.value == "error" and f.subject == "val/acc"
    assert f.evidence["chance"] == 0.5 and f.evidence["num_classes"] == 2
    assert "from the config" in f.message and f.steps == (STEPS[0], STEPS[-1])


def test_class_count_from_the_models_last_layer():
    meta = model_meta([("body.weight", (64, 20)), ("head.weight", (10, 64)), ("head.bias", (10,))])
    [f] = metric_stagnation(_run(_acc(0.1, noise=0.01), meta))
    assert f.evidence["num_classes"] == 10 and "output size" in f.message


def test_a_single_logit_model_is_binary():
    meta = model_meta([("fc.weight", (1, 16)), ("fc.bias", (1,))])
    [f] = metric_stagnation(_run(_acc(0.52), meta, name="accuracy"))
    assert f.evidence["num_classes"] == 2


def test_without_a_class_count_a_metric_pinned_to_one_over_k_is_a_warning():
    [f] = metric_stagnation(_run(_acc(0.25, noise=0.002)))
    assert f.severity.value == "warning" and f.evidence["num_classes"] == 4
    assert "inferred" in f.message


def test_percent_metrics_and_auc():
    [f] = metric_stagnation(_run(100 * _acc(0.5), {"config": {"n_classes": 2}}))
    assert f.evidence["median"] == pytest.approx(0.5, abs=0.01)
    [g] = metric_stagnation(_run(_acc(0.5, noise=0.01), name="auc"))
    assert g.evidence["chance"] == 0.5 and "chance AUC" in g.message


def test_a_metric_that_fell_back_to_chance_fires():
    values = np.concatenate([np.linspace(0.3, 0.8, 10), _acc(0.1, n=10)])
    [f] = metric_stagnation(_run(values, {"config": {"num_classes": 10}}))
    assert f.evidence["best"] == pytest.approx(0.8)


def test_quiet_when_the_model_learns():
    values = np.linspace(0.3, 0.92, len(STEPS))
    assert metric_stagnation(_run(values, {"config": {"num_classes": 4}})) == []


def test_quiet_when_flat_but_well_above_chance():
    assert metric_stagnation(_run(_acc(0.62), {"config": {"num_classes": 2}})) == []
    assert metric_stagnation(_run(_acc(0.6))) == []  # no class count, not near 1/k


def test_quiet_on_top_k_metrics_train_metrics_and_few_evaluations():
    meta = {"config": {"num_classes": 10}}
    assert metric_stagnation(_run(_acc(0.1), meta, name="top5_acc")) == []
    assert metric_stagnation(_run(_acc(0.1), meta, split="train")) == []
    few = make_run(meta, scalars=[scalar_rows("acc", [0.1, 0.1, 0.1], split="val")])
    assert metric_stagnation(few) == []


def test_evaluations_of_a_model_gone_nan_are_skipped():
    learning = np.linspace(0.3, 0.6, 10)
    constant = np.full(10, 0.25)  # NaN outputs argmax to class 0: a constant "accuracy"
    val_loss = np.concatenate([np.linspace(1.2, 0.9, 10), np.full(10, np.nan)])
    run = make_run({"config": {"num_classes": 4}}, scalars=[
        scalar_rows("acc", np.concatenate([learning, constant]), split="val", steps=STEPS),
        scalar_rows("loss", val_loss, split="val", steps=STEPS)])
    assert metric_stagnation(run) == []
