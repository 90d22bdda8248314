"""target-problems: the targets are not what the loss or the training expects.

What it detects
    From the profiles of the targets given to `Recorder.step(targets=...)` and `log()`:
    - labels outside what the loss expects: binary labels in {-1, 1} while the train loss goes
      negative (a cross-entropy given -1 labels; on at least `negative_share` of the steps), or
      integer class indices at or above the size of the model's output layer (its last weight
    matrix's first dimension);
    - train batches holding one or two classes (at least `sorted_share` of them, batches of at
      least `per_class` rows per class) where the data has `min_classes` or more: an
      unshuffled, sorted dataset;
    - regression targets (not integer-valued) whose typical magnitude is above `max_scale` or
      below `min_scale` (a target tensor of several columns by its largest column);
    - as information, a binary task whose positive class is rarer than `rare`, or a task of
      three or more classes (the classes table) whose largest class outnumbers its rarest
      `ratio` times or more in the train targets, with the validation split's balance beside.

Why it matters
    Each of these trains silently on the wrong problem. A BCE loss given -1 labels rewards
    pushing predictions to 0 without bound, so the loss falls below zero. A class index past the
    output layer either crashes on the GPU (device-side assert) or is clamped or ignored
    somewhere. Batches of one class make every step pull the model toward that class: the loss
    oscillates with the data's order and the model forgets earlier classes. Targets in the
    thousands make MSE gradients huge and the output layer's scale wrong.

Example
    Train targets take the values {-1, 1} and the train loss is negative on 45% of the steps.
    Or: 19 of 20 train batches of 32 hold at most 2 classes, while the data has 4.

How to fix
    Map {-1, 1} labels to {0, 1} for BCE (`(y + 1) / 2`), or use a margin loss made for them.
    Size the output layer to the number of classes (labels 0..C-1). Shuffle the training data
    (`DataLoader(shuffle=True)` or a shuffling sampler). Standardize regression targets
    (subtract their mean, divide by their std) and invert the transform at prediction time.

False positives
    {-1, 1} labels with a loss that stays positive (hinge, soft-margin) stay quiet. Binary tasks
    cannot look sorted (two classes per batch is all there is), and batches too small to hold
    several classes are not judged. Class imbalance is information, never a warning. Targets
    that are integer counts are not judged as regression targets.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracelab.analyzers._dynamics import OUTCOME, finite, fmt
from tracelab.core import causes
from tracelab.core.causes import explains
from tracelab.core.findings import ERROR, INFO, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import OTHER_CLASS, TRAIN, Needs


@rule(name="target-problems", code="TL604", requires=(Needs.TARGETS,), plot=Plot.NONE,
      links=(explains("loss-oscillation", "loss-spike", "exploding-gradients", "update-ratio",
                      *OUTCOME, why="labels the loss cannot fit keep the loss from settling",
                      timing="overlap", when=causes.not_input),))
def target_problems(run: Run, *, negative_share: float = 0.1, min_classes: int = 4,
                    sorted_share: float = 0.8, per_class: int = 4, min_batches: int = 5,
                    max_scale: float = 100.0, min_scale: float = 0.01,
                    rare: float = 0.1, ratio: float = 10.0) -> list[Finding]:
    tg = run.targets
    findings = _class_balance(run, ratio)  # 3+ classes; _imbalance below: 0/1 labels only
    numeric: dict[str, list[tuple[str, pd.DataFrame]]] = {}
    for feature, rows in tg.groupby("feature", sort=False):
        train = rows[rows["split"] == TRAIN]
        ints = bool((rows["int_frac"].astype(float) >= 1.0).all())
        if ints:
            findings += _label_range(run, str(feature), rows, negative_share)
            findings += _sorted(str(feature), rows, train, min_classes, sorted_share,
                                per_class, min_batches)
            findings += _imbalance(str(feature), train, rare)
        elif len(train):
            numeric.setdefault(_NUMBERED.sub("", str(feature)), []).append((str(feature), train))
    for columns in numeric.values():
        # A target tensor of many columns (a VAE's images) is judged by its largest column:
        # the blank border pixels of an image are no scale of their own.
        scales = [_typical(train) for _, train in columns]
        feature, train = columns[int(np.nanargmax(scales))] if len(columns) > 1 and \
            np.isfinite(scales).any() else columns[0]
        findings += _scale(feature, train, max_scale, min_scale)
    return findings


def _label_range(run: Run, feature: str, rows: pd.DataFrame, share: float) -> list[Finding]:
    low, high = float(rows["min"].min()), float(rows["max"].max())
    steps = (int(rows["step"].min()), int(rows["step"].max()))
    if low == -1 and high == 1 and (rows["n_unique"] <= 3).all():
        loss = finite(run.loss()).to_numpy(dtype=float)
        negative = float(np.mean(loss < 0)) if len(loss) else 0.0
        if negative >= share:
            return [target_problems.finding(
                ERROR, feature, steps,
                f"Targets '{feature}' take the values {{-1, 1}} while the train loss is "
                f"negative on {negative:.0%} of the steps (down to {fmt(loss.min())}): a "
                "cross-entropy loss (BCE) expects labels in [0, 1].",
                {"min": low, "max": high, "negative_loss_share": negative},
                "Map the labels to {0, 1} for BCE ((y + 1) / 2), or use a margin loss made "
                "for {-1, 1} labels.")]
    outputs = _output_size(run)
    integer = rows["dtype"].astype(str).str.startswith(("int", "uint")).all()
    if outputs and outputs > 1 and integer and high >= outputs:
        return [target_problems.finding(
            ERROR, feature, steps,
            f"Class indices in '{feature}' range over {fmt(low)}..{fmt(high)}, but the model's "
            f"output layer has {outputs} outputs (valid indices 0..{outputs - 1}).",
            {"min": low, "max": high, "outputs": outputs},
            "Size the output layer to the number of classes, or remap the labels to "
            "0..C-1 (a 1-based label set is the usual cause).")]
    return []


def _output_size(run: Run) -> int | None:
    """The first dimension of the model's last weight matrix: its output layer's size."""
    params = (run.meta.get("model") or {}).get("parameters") or []
    shapes = [p.get("shape") for p in params if len(p.get("shape") or ()) >= 2]
    return int(shapes[-1][0]) if shapes else None


def _sorted(feature: str, rows: pd.DataFrame, train: pd.DataFrame, min_classes: int,
            share: float, per_class: int, min_batches: int) -> list[Finding]:
    classes = len(set(rows["min"].astype(float)) | set(rows["max"].astype(float)))
    classes = max(classes, int(rows["n_unique"].max()))
    big = train[train["count"] >= per_class * classes]
    if classes < min_classes or len(big) < min_batches:
        return []
    few = big["n_unique"] <= 2
    if float(few.mean()) < share:
        return []
    return [target_problems.finding(
        WARNING, feature, (int(big["step"].min()), int(big["step"].max())),
        f"{int(few.sum())} of {len(big)} train batches of '{feature}' hold at most 2 classes "
        f"(median {fmt(big['n_unique'].median())}), while the data has {classes}: the "
        "training data is not shuffled (sorted by label).",
        {"batches": len(big), "batches_with_few_classes": int(few.sum()), "classes": classes},
        "Shuffle the training data: DataLoader(shuffle=True) or a shuffling sampler "
        "(DistributedSampler with set_epoch each epoch).")]


def _imbalance(feature: str, train: pd.DataFrame, rare: float) -> list[Finding]:
    if not len(train) or float(train["min"].min()) != 0 or float(train["max"].max()) != 1:
        return []
    counts = train["count"].astype(float)
    positive = float((train["mean"].astype(float) * counts).sum() / counts.sum())
    minority = min(positive, 1 - positive)
    if minority >= rare:
        return []
    return [target_problems.finding(
        INFO, feature, (int(train["step"].min()), int(train["step"].max())),
        f"The positive class of '{feature}' is {positive:.1%} of the train targets.",
        {"positive_share": positive},
        "Judge the model by precision/recall or AUC rather than accuracy; weight the loss "
        "(pos_weight) if the rare class matters.")]


def _class_balance(run: Run, ratio: float) -> list[Finding]:
    """Information on the train class balance of integer targets of 3+ classes."""
    cl = run.classes
    cl = cl[cl["label"] != OTHER_CLASS]
    findings = []
    for target, rows in cl.groupby("target", sort=False):
        shares = {split: part.groupby("label")["count"].sum() / part["count"].sum()
                  for split, part in rows.groupby("split")}
        train = shares.get(TRAIN)
        if train is None or len(train) < 3 or train.max() < ratio * train.min():
            continue
        big, small = int(train.idxmax()), int(train.idxmin())
        val = {s: v for s, v in shares.items() if s != TRAIN}
        beside = "".join(f"; in {s}: {v.get(small, 0.0):.1%} and {v.get(big, 0.0):.1%}"
                         for s, v in sorted(val.items()))
        steps = (int(rows["step"].min()), int(rows["step"].max()))
        findings.append(target_problems.finding(
            INFO, str(target), steps,
            f"Class {small} of '{target}' is {train[small]:.1%} of the train targets, class "
            f"{big} {train[big]:.1%} ({len(train)} classes seen{beside}).",
            {"classes": len(train), "rarest_class": small, "rarest_share": float(train[small]),
             "largest_class": big, "largest_share": float(train[big]),
             **{f"{s}_rarest_share": float(v.get(small, 0.0)) for s, v in val.items()}},
            "Judge the model per class (balanced accuracy, per-class recall, macro F1) rather "
            "than by accuracy; weight the loss or resample if the rare classes matter."))
    return findings


_NUMBERED = re.compile(r"\[\d+\]$")  # target[3]: one column of a target tensor


def _typical(train: pd.DataFrame) -> float:
    """The median over batches of sqrt(mean² + std²): a column's typical magnitude."""
    mean, std = train["mean"].astype(float), train["std"].astype(float)
    return float(np.sqrt(mean ** 2 + std ** 2).median())


def _scale(feature: str, train: pd.DataFrame, max_scale: float,
           min_scale: float) -> list[Finding]:
    mean, std = train["mean"].astype(float), train["std"].astype(float)
    scale = _typical(train)
    if not np.isfinite(scale) or (min_scale <= scale <= max_scale) or scale == 0:
        return []
    return [target_problems.finding(
        WARNING, feature, (int(train["step"].min()), int(train["step"].max())),
        f"Regression targets '{feature}' have a typical magnitude of {fmt(scale)} (mean "
        f"{fmt(mean.median())}, std {fmt(std.median())}), far from unit scale: the loss and "
        "its gradients scale with it, and the output layer must learn it.",
        {"scale": scale, "mean": float(mean.median()), "std": float(std.median())},
        "Standardize the targets (subtract their mean, divide by their std) and invert the "
        "transform at prediction time.")]
