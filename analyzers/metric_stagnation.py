"""metric-stagnation: a validation accuracy stays flat at chance level.

What it detects
    A validation accuracy-like metric (a name containing "acc"; "auc" too, whose chance is 0.5)
    whose last half of evaluations all sit near chance: within `tolerance` times chance, or
    `min_band` (capped at chance itself) when that is wider. Chance is 1/k for k classes,
    with k taken from the run's config (`num_classes`, `n_classes`, `num_labels`, ...), else
    from the output size of the model's last weight matrix (1 output: binary). Without either,
    a metric pinned within 0.01 of 1/k for a small k (2 to 10) counts at warning level.

Why it matters
    A model at chance learned nothing usable, however the loss looks: typical causes are wrong
    or shuffled labels, over-strong augmentation, or a frozen or dead network that predicts one
    class for every input.

Example
    val/acc = 0.5001, 0.4998, 0.5003 ... in a binary task for the whole run.

How to fix
    Check the labels against the inputs (a few samples by hand), the label encoding, the
    augmentation strength, and the other findings for frozen or dead layers.

False positives
    Tasks that are genuinely unlearnable from the inputs, and imbalanced data where chance is
    the majority share (not 1/k): the rule uses 1/k. Metrics given in percent are rescaled.
    Evaluations whose loss is NaN/Inf are skipped (nonfinite-values reports those).
"""
from __future__ import annotations

import re

import numpy as np

from tracelab.analyzers._dynamics import finite, fmt, param_shapes
from tracelab.core.findings import ERROR, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import LOSS_NAME, TRAIN, Needs

_CLASS_KEYS = ("num_classes", "n_classes", "classes", "num_labels", "n_labels", "n_class",
               "nclasses", "num_class")
_ACC = re.compile(r"acc|auc", re.IGNORECASE)
_NOT_CHANCE = re.compile(r"top.?[2-9]|top.?\d\d", re.IGNORECASE)


@rule(name="metric-stagnation", code="TL106", requires=(Needs.EVAL,), merge="metric",
      plot=Plot.METRIC)
def metric_stagnation(run: Run, *, min_evals: int = 3, tolerance: float = 0.15,
                      min_band: float = 0.03) -> list[Finding]:
    sc = run.scalars
    evals = sc[sc["split"] != TRAIN][["split", "name"]].drop_duplicates()
    known_k, source = _num_classes(run)
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
            k, how = 2, "AUC"
        elif known_k:
            k, how = known_k, source
        else:
            k, how = round(1 / level) if level > 0 else 0, "guessed"
            if not 2 <= k <= 10:
                continue
        chance = 1.0 / k
        band = max(tolerance * chance, min(min_band, chance))
        if how == "guessed":
            band = min(band, 0.01)
        off = float(np.max(np.abs(window.to_numpy() - chance)))
        if off > band:
            continue
        steps = (int(values.index[0]), int(values.index[-1]))
        findings.append(metric_stagnation.finding(
            WARNING if how == "guessed" else ERROR, f"{split}/{name}", steps,
            f"{split} {name} stayed at chance over its last {len(window)} evaluations: "
            f"median {fmt(level)}, never more than {fmt(off)} from 1/{k} = {fmt(chance)} "
            f"({_why(how, k)}).",
            {"median": level, "chance": chance, "num_classes": k, "max_deviation": off,
             "evaluations": len(window), "best": float(values.max())},
            "Check the labels against the inputs and their encoding, the augmentation, and "
            "the other findings for frozen or dead layers."))
    return findings


def _why(how: str, k: int) -> str:
    return {"config": f"{k} classes from the config", "model": f"{k} classes from the model's "
            "output size", "AUC": "chance AUC", "guessed": f"class count {k} inferred from the "
            "metric itself"}[how]


def _num_classes(run: Run) -> tuple[int | None, str]:
    config = run.meta.get("config") or {}
    if isinstance(config, dict):
        for key in _CLASS_KEYS:
            value = config.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 2:
                return value, "config"
    shapes = [s for s in param_shapes(run).values() if len(s) >= 2]
    if shapes and shapes[-1][0] >= 1:
        out = int(shapes[-1][0])
        return (2 if out == 1 else out), "model"
    return None, ""
