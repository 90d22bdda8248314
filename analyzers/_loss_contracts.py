"""What the loss-contract rules share: torch's loss functions by family (meta.json's `loss_fn`
type is a class name or a function's name), the outputs' facts of a split as a frame, and the
loss of the best prediction that ignores the input (`constant_loss`, from the recorded targets).

Pure helpers over a run; no rule lives here.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tracelab.core.run import Run
from tracelab.core.schema import (MAX_CLASSES, META_LOSS_FN, META_OUTPUTS, OTHER_CLASS,
                                  OUTPUT_SIGNALS, TRAIN)

# Each family names the losses whose inputs follow one contract.
CROSS_ENTROPY = frozenset({"CrossEntropyLoss", "cross_entropy"})  # logits, any real rows
NLL = frozenset({"NLLLoss", "nll_loss"})  # log-probability rows
BCE_LOGITS = frozenset({"BCEWithLogitsLoss", "binary_cross_entropy_with_logits"})  # logits
BCE = frozenset({"BCELoss", "binary_cross_entropy"})  # probabilities
SQUARED = frozenset({"MSELoss", "mse_loss"})
ABSOLUTE = frozenset({"L1Loss", "l1_loss", "SmoothL1Loss", "smooth_l1_loss", "HuberLoss",
                      "huber_loss"})
# Losses whose value is never below 0 when their inputs keep their contract (a margin, a
# distance, -log of a probability, a divergence between distributions).
NONNEGATIVE = CROSS_ENTROPY | NLL | BCE_LOGITS | BCE | SQUARED | ABSOLUTE | frozenset({
    "KLDivLoss", "kl_div", "SoftMarginLoss", "soft_margin_loss", "MultiLabelSoftMarginLoss",
    "multilabel_soft_margin_loss", "MultiMarginLoss", "multi_margin_loss",
    "MultiLabelMarginLoss", "multilabel_margin_loss", "MarginRankingLoss",
    "margin_ranking_loss", "TripletMarginLoss", "triplet_margin_loss", "CosineEmbeddingLoss",
    "cosine_embedding_loss", "CTCLoss", "ctc_loss"})


def loss_fn(run: Run) -> dict[str, Any]:
    """meta.json's `loss_fn` ({} when the run was not given one: nothing is known of it)."""
    found = run.meta.get(META_LOSS_FN)
    return found if isinstance(found, dict) else {}


def loss_type(run: Run) -> str | None:
    kind = loss_fn(run).get("type")
    return str(kind) if kind else None


def mean_reduced(run: Run) -> bool:
    """Whether the recorded loss is a mean over elements (torch's default): bounds on one
    element's loss then bound the recorded value. Unknown losses count as not."""
    found = loss_fn(run)
    return bool(found) and found.get("reduction", "mean") in ("mean", "batchmean")


def output_facts(run: Run, split: str = TRAIN) -> pd.DataFrame:
    """The outputs' facts (schema.OUTPUT_SIGNALS) as a step x name frame, profiled steps only."""
    sg = run.signals
    rows = sg[(sg["split"] == split) & sg["name"].isin(OUTPUT_SIGNALS)]
    if not len(rows):
        return pd.DataFrame(columns=list(OUTPUT_SIGNALS), dtype=float)
    frame = rows.pivot_table(index="step", columns="name", values="value", aggfunc="last")
    return frame.reindex(columns=list(OUTPUT_SIGNALS)).astype(float).sort_index()


def output_shapes(run: Run, split: str = TRAIN) -> dict[str, Any]:
    """meta.json's `outputs` of a split: shape, dtype, targets_shape, targets_dtype, step."""
    found = (run.meta.get(META_OUTPUTS) or {}).get(split)
    return found if isinstance(found, dict) else {}


def constant_loss(run: Run, split: str = TRAIN) -> float | None:
    """The mean-reduced loss on `split` of the best prediction that ignores the input, from
    that split's recorded targets (their variance for MSE, the entropy of their class shares
    for a cross-entropy); None where the loss or its targets do not say."""
    kind = loss_type(run)
    if kind is None or not mean_reduced(run):
        return None
    if kind in SQUARED:
        return _target_variance(run, split)
    if kind in CROSS_ENTROPY | NLL:
        shares = class_shares(run, split)
        if shares is None:
            return None
        smoothing = float(loss_fn(run).get("label_smoothing") or 0.0) if kind in \
            CROSS_ENTROPY else 0.0
        return _entropy((1 - smoothing) * shares + smoothing / len(shares))
    if kind in BCE | BCE_LOGITS:
        rows = _targets(run, split)
        if rows is None or rows["min"].min() < 0 or rows["max"].max() > 1:
            return None
        p = float(np.average(rows["mean"], weights=rows["count"]))
        return _entropy(np.array([p, 1 - p]))
    return None


def constant_losses(run: Run, split: str = TRAIN) -> pd.Series | None:
    """Per profiled step of `split`, the loss that `constant_loss`'s prediction has on that
    step's own batch (its targets' profile or class counts): paired with the recorded loss of
    the same step, free of the noise of which rows were profiled. None where not known."""
    kind = loss_type(run)
    if kind is None or not mean_reduced(run) or constant_loss(run, split) is None:
        return None
    if kind in SQUARED:
        rows = _targets(run, split)
        per = []
        for _, f in rows.groupby("feature"):
            n, m, sd = (f[c].to_numpy(dtype=float) for c in ("count", "mean", "std"))
            grand = (n * m).sum() / n.sum()
            per.append(pd.Series((n - 1) / n * sd ** 2 + (m - grand) ** 2,
                                 index=f["step"].to_numpy()))
        return pd.concat(per, axis=1).mean(axis=1).groupby(level=0).mean()
    if kind in CROSS_ENTROPY | NLL:
        cl = _counted(run, split)
        if cl is None:
            return None
        counts = cl.pivot_table(index="step", columns="label", values="count", aggfunc="sum",
                                fill_value=0).astype(float)
        shares = counts.sum() / counts.sum().sum()
        smoothing = float(loss_fn(run).get("label_smoothing") or 0.0) if kind in \
            CROSS_ENTROPY else 0.0
        k = len(shares)
        q = (1 - smoothing) * shares + smoothing / k
        batch = counts.div(counts.sum(axis=1), axis=0)
        target = (1 - smoothing) * batch + smoothing / k
        return -(target * np.log(q.clip(lower=1e-300))).sum(axis=1)
    rows = _targets(run, split)  # BCE: 0/1 targets' means per batch
    m = rows.groupby("step")["mean"].mean().astype(float)
    p = float(np.average(rows["mean"], weights=rows["count"]))
    return -(m * np.log(p) + (1 - m) * np.log(1 - p)) if 0 < p < 1 else None


def _targets(run: Run, split: str):
    rows = run.targets
    rows = rows[(rows["split"] == split) & (rows["count"] > 1)]
    rows = rows[np.isfinite(rows[["mean", "std", "min", "max"]].to_numpy(dtype=float)).all(1)]
    return rows if len(rows) else None


def _target_variance(run: Run, split: str) -> float | None:
    """The targets' variance pooled over the profiled batches, averaged over target columns."""
    rows = _targets(run, split)
    if rows is None:
        return None
    variances = []
    for _, f in rows.groupby("feature"):
        n, m, s = (f[c].to_numpy(dtype=float) for c in ("count", "mean", "std"))
        total = n.sum()
        grand = (n * m).sum() / total
        variances.append((((n - 1) * s ** 2).sum() + (n * (m - grand) ** 2).sum()) / total)
    return float(np.mean(variances))


def class_shares(run: Run, split: str = TRAIN) -> np.ndarray | None:
    """The class shares of a split's targets from the classes table (one integer target, no
    label beyond its range, two classes or more); None where it does not say."""
    cl = _counted(run, split)
    if cl is None:
        return None
    counts = cl.groupby("label")["count"].sum().to_numpy(dtype=float)
    return counts / counts.sum() if len(counts) >= 2 else None


def _counted(run: Run, split: str) -> pd.DataFrame | None:
    """The split's rows of the classes table that the loss counts: one integer target, every
    label within range, or beyond it (OTHER_CLASS) only the loss's ignore_index, whose rows
    are left out (the padding a sequence loss skips); None where it does not say."""
    cl = run.classes
    cl = cl[cl["split"] == split]
    if not len(cl) or cl["target"].nunique() != 1:
        return None
    other = cl["label"] == OTHER_CLASS
    if other.any():
        if not _only_ignored(run, split):
            return None
        cl = cl[~other & (cl["count"] > 0)]
    return cl if len(cl) else None


def _only_ignored(run: Run, split: str) -> bool:
    """Whether every target of the split beyond 0 .. MAX_CLASSES - 1 is the loss's
    ignore_index (a negative one: labels below 0 the loss does not skip fail in torch), by
    the targets' recorded range."""
    ignore = loss_fn(run).get("ignore_index")
    if isinstance(ignore, bool) or not isinstance(ignore, int) or ignore >= 0:
        return False
    tg = run.targets
    tg = tg[tg["split"] == split]
    if not len(tg):
        return False
    low, high = float(tg["min"].min()), float(tg["max"].max())
    return low >= ignore and high < MAX_CLASSES


def _entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())
