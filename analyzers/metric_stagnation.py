"""metric-stagnation: a validation accuracy stays flat at chance level.

What it detects
    A validation accuracy-like metric (a name containing "acc"; "auc" too, whose chance is 0.5)
    whose last half of evaluations all sit at chance. Chance comes from the targets' class
    counts (the classes table) of the evaluated split, or of train when that split's targets
    were not given: a prediction independent of the labels scores between the smallest and the
    largest class's share (1/k for k balanced classes). That interval is widened by
    `tolerance` of the largest share or `min_band`, never by more than `tolerance` of the
    headroom above it.

Why it matters
    A model at chance learned nothing usable, however the loss looks: typical causes are wrong
    or shuffled labels, over-strong augmentation, or a frozen or dead network that predicts one
    class for every input.

Example
    val/acc = 0.5001, 0.4998, 0.5003 ... while val's targets hold two classes in equal shares.

How to fix
    Check the labels against the inputs (a few samples by hand), the label encoding, the
    augmentation strength, and the other findings for frozen or dead layers.

False positives
    Chance is never judged from an output's width (a contrastive model's projection, a
    language model's vocabulary) nor from the metric itself: without class counts of integer
    targets (`step(targets=...)`, `log(..., targets=...)`) the rule is skipped, and with labels
    beyond the classes table's range it stays quiet. Imbalanced data is judged against the
    majority share as well as 1/k. Metrics given in percent are rescaled. Evaluations whose loss
    is NaN/Inf are skipped (nonfinite-values reports those).
"""
from __future__ import annotations

import re

import numpy as np

from tracelab.analyzers._dynamics import finite, fmt
from tracelab.core.findings import ERROR, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import LOSS_NAME, OTHER_CLASS, TRAIN, Needs

_ACC = re.compile(r"acc|auc", re.IGNORECASE)
_NOT_CHANCE = re.compile(r"top.?[2-9]|top.?\d\d", re.IGNORECASE)


@rule(name="metric-stagnation", code="TL106", requires=(Needs.EVAL, Needs.CLASSES),
      merge="metric", plot=Plot.METRIC)
def metric_stagnation(run: Run, *, min_evals: int = 3, tolerance: float = 0.15,
                      min_band: float = 0.03) -> list[Finding]:
    sc = run.scalars
    evals = sc[sc["split"] != TRAIN][["split", "name"]].drop_duplicates()
    chances = _chances(run)
    findings = []
    for split, name in evals.itertuples(index=False):
        if not _ACC.search(str(name)) or _NOT_CHANCE.search(str(name)):
            continue
        values = finite(run.scalar(name, split))
        # After the model went NaN its "accuracy" is that of a constant output: not chance.
        loss = run.scalar(LOSS_NAME, split)
        values = values.drop(loss.index[~np.isfinite(loss.to_numpy())], errors="ignore")
        if len(values) < 2 * min_evals - 1:
            continue
        if float(values.max()) > 1.0 and float(values.max()) <= 100.0:
            values = values / 100.0
        window = values.iloc[len(values) // 2:]
        level = float(window.median())
        if "auc" in str(name).lower():
            k, low, high, how = 2, 0.5, 0.5, "chance AUC"
        elif split in chances or TRAIN in chances:
            k, low, high, how = chances.get(split) or chances[TRAIN]
        else:
            continue
        # Never wider than a share of the headroom: 90% accuracy on 90/10 labels is chance,
        # 95% is not.
        band = min(max(tolerance * high, min(min_band, high)), tolerance * (1 - high))
        lo, hi = low - band, high + band
        vals = window.to_numpy()
        if not (vals.min() >= lo and vals.max() <= hi):
            continue
        off = float(np.max(np.maximum(low - vals, vals - high).clip(min=0)))
        steps = (int(values.index[0]), int(values.index[-1]))
        chance_text = (fmt(low) if low == high else f"{fmt(low)} to {fmt(high)}")
        findings.append(metric_stagnation.finding(
            ERROR, f"{split}/{name}", steps,
            f"{split} {name} stayed at chance over its last {len(window)} evaluations: "
            f"median {fmt(level)}, never more than {fmt(off)} from chance {chance_text} "
            f"({how}).",
            {"median": level, "chance": high, "chance_low": low, "num_classes": k,
             "max_deviation": off, "evaluations": len(window), "best": float(values.max())},
            "Check the labels against the inputs and their encoding, the augmentation, and "
            "the other findings for frozen or dead layers."))
    return findings


def _chances(run: Run) -> dict[str, tuple[int, float, float, str]]:
    """Per split of the classes table: (k, the smallest and the largest class's share, the
    words saying so): a prediction independent of the labels scores between the two. None
    for a split holding labels beyond the table's range or a single class."""
    cl = run.classes
    out = {}
    for split, rows in cl.groupby("split", sort=False):
        if (rows["label"] == OTHER_CLASS).any():
            continue
        counts = rows.groupby("label")["count"].sum()
        k = len(counts)
        if k < 2:
            continue
        top, least = float(counts.max() / counts.sum()), float(counts.min() / counts.sum())
        how = (f"{k} classes in {split}'s targets" + ("" if top <= 1.5 / k else
               f", from {least:.0%} to {top:.0%} of them"))
        out[str(split)] = (k, least, top, how)
    return out
