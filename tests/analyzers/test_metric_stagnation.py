"""metric-stagnation: a validation accuracy flat at the chance its targets' class counts give
fires; learning, top-k, and a run without class counts (chance unknown) stay quiet."""
import numpy as np
import pandas as pd
import pytest
from dynamics_frames import model_meta, scalar_rows

from tracelab.analyzers.metric_stagnation import metric_stagnation
from tracelab.core.run import Run

STEPS = list(range(49, 1000, 50))


def _acc(level, noise=0.004, seed=0, n=len(STEPS)):
    rng = np.random.default_rng(seed)
    return level + noise * rng.standard_normal(n)


def _classes(counts, split="val"):
    return pd.DataFrame({"step": 0, "split": split, "target": "target",
                         "label": list(range(len(counts))), "count": counts})


def _run(values, counts=(50, 50), meta=None, name="acc", split="val", classes=None):
    scalars = pd.concat([scalar_rows("loss", np.linspace(1, 0.5, 1000)),
                         scalar_rows(name, values, split=split, steps=STEPS)], ignore_index=True)
    frames = {"scalars": scalars}
    if classes is not None or counts is not None:
        frames["classes"] = classes if classes is not None else _classes(list(counts))
    return Run.from_frames(meta, **frames)


def test_binary_task_at_half_is_an_error():
    [f] = metric_stagnation(_run(_acc(0.5001)))
    assert f.code == "TL106" and f.severity.value == "error" and f.subject == "val/acc"
    assert f.evidence["chance"] == 0.5 and f.evidence["num_classes"] == 2
    assert "2 classes in val's targets" in f.message and f.steps == (STEPS[0], STEPS[-1])


def test_ten_classes_at_a_tenth():
    [f] = metric_stagnation(_run(_acc(0.1, noise=0.01), counts=[30] * 10))
    assert f.evidence["num_classes"] == 10


def test_imbalanced_labels_at_the_majority_share_are_chance():
    [f] = metric_stagnation(_run(_acc(0.9, noise=0.003), counts=(90, 10)))
    assert f.evidence["chance"] == pytest.approx(0.9) and "from 10% to 90%" in f.message
    assert metric_stagnation(_run(_acc(0.96, noise=0.003), counts=(90, 10))) == []


def test_train_class_counts_stand_in_for_an_unrecorded_split():
    [f] = metric_stagnation(_run(_acc(0.25, noise=0.01), classes=_classes([40] * 4, "train")))
    assert f.evidence["num_classes"] == 4 and "train's targets" in f.message


def test_chance_never_comes_from_the_output_width():
    # A contrastive model's 128-wide projection: its pair accuracy near 1/128 is not chance
    # information; no class counts, no judgement.
    meta = model_meta([("proj.weight", (128, 64)), ("proj.bias", (128,))])
    assert metric_stagnation(_run(_acc(0.5, noise=0.002), counts=None, meta=meta)) == []
    assert metric_stagnation(_run(_acc(1 / 128, noise=0.0005), counts=None, meta=meta)) == []
    assert metric_stagnation.spec.requires[-1].key == "classes"


def test_labels_beyond_the_classes_table_leave_chance_unknown():
    classes = _classes([50, 50]).assign(label=[0, -1])
    assert metric_stagnation(_run(_acc(0.5), classes=classes)) == []


def test_percent_metrics_and_auc():
    [f] = metric_stagnation(_run(100 * _acc(0.5)))
    assert f.evidence["median"] == pytest.approx(0.5, abs=0.01)
    [g] = metric_stagnation(_run(_acc(0.5, noise=0.01), counts=[30] * 10, name="auc"))
    assert g.evidence["chance"] == 0.5 and "chance AUC" in g.message


def test_a_metric_that_fell_back_to_chance_fires():
    values = np.concatenate([np.linspace(0.3, 0.8, 10), _acc(0.1, n=10)])
    [f] = metric_stagnation(_run(values, counts=[30] * 10))
    assert f.evidence["best"] == pytest.approx(0.8)


def test_quiet_when_the_model_learns():
    values = np.linspace(0.3, 0.92, len(STEPS))
    assert metric_stagnation(_run(values, counts=[25] * 4)) == []


def test_quiet_when_flat_but_well_above_chance():
    assert metric_stagnation(_run(_acc(0.62))) == []


def test_quiet_on_top_k_metrics_train_metrics_and_few_evaluations():
    assert metric_stagnation(_run(_acc(0.1), counts=[30] * 10, name="top5_acc")) == []
    assert metric_stagnation(_run(_acc(0.1), counts=[30] * 10, split="train")) == []
    few = Run.from_frames(None, scalars=scalar_rows("acc", [0.1, 0.1, 0.1], split="val"),
                          classes=_classes([30] * 10))
    assert metric_stagnation(few) == []


def test_evaluations_of_a_model_gone_nan_are_skipped():
    learning = np.linspace(0.3, 0.6, 10)
    constant = np.full(10, 0.25)  # NaN outputs argmax to class 0: a constant "accuracy"
    val_loss = np.concatenate([np.linspace(1.2, 0.9, 10), np.full(10, np.nan)])
    run = Run.from_frames(None, scalars=pd.concat([
        scalar_rows("acc", np.concatenate([learning, constant]), split="val", steps=STEPS),
        scalar_rows("loss", val_loss, split="val", steps=STEPS)], ignore_index=True),
        classes=_classes([25] * 4))
    assert metric_stagnation(run) == []
