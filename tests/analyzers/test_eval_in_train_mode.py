"""eval-in-train-mode: Dropout or BatchNorm active while a validation split was evaluated."""
import pandas as pd

from tracelab.analyzers.eval_in_train_mode import eval_in_train_mode
from tracelab.core.run import Run


def _run(dropout, norm, *, n_drop=2, n_norm=1, model=None, split="val"):
    rows = []
    for i, (d, b) in enumerate(zip(dropout, norm)):
        step = 25 * (i + 1)
        for name, value in (("train_mode/model", 1 if model is None else model),
                            ("train_mode/dropout", d), ("train_mode/batchnorm", b),
                            ("modules/dropout", n_drop), ("modules/batchnorm", n_norm)):
            rows.append({"step": step, "split": split, "name": name, "value": float(value)})
    return Run.from_frames(signals=pd.DataFrame(rows))


def test_fires_when_dropout_and_batchnorm_stay_on_during_validation():
    [f] = eval_in_train_mode(_run([2, 2, 2, 2], [1, 1, 1, 1]))
    assert f.code == "TL603" and f.subject == "val" and f.severity.value == "warning"
    assert "2 of 2 Dropout and 1 of 1 BatchNorm" in f.message and "running statistics" in f.message
    assert "model.eval()" in f.fix


def test_dropout_alone_is_named_without_batchnorm_effects():
    [f] = eval_in_train_mode(_run([1, 1, 1], [0, 0, 0], n_norm=0))
    assert "1 of 2 Dropout modules" in f.message and "BatchNorm" not in f.message


def test_quiet_in_eval_mode_and_for_models_without_dropout_or_batchnorm():
    assert eval_in_train_mode(_run([0, 0, 0], [0, 0, 0], model=0)) == []
    # The model's own flag means nothing without Dropout or BatchNorm modules.
    assert eval_in_train_mode(_run([0, 0, 0], [0, 0, 0], n_drop=0, n_norm=0, model=1)) == []
    # One evaluation of five in training mode (a slip, not the loop): below min_share.
    assert eval_in_train_mode(_run([0, 0, 1, 0, 0], [0, 0, 0, 0, 0])) == []


def test_train_split_signals_are_not_evaluations():
    assert eval_in_train_mode(_run([2, 2], [1, 1], split="train")) == []
