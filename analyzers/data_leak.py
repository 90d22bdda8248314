"""data-leak: an input feature determines the target: the label, or a function of it, is among
the inputs.

What it detects
    From the rows table (a few whole rows of tabular batches per split, each with its target):
    (a) for class targets, a feature whose every value that repeats among the distinct rows
    belongs to one class only, when the odds of so many pure groups under independence (the
    product over repeated values of the chance that all its rows share a class, given the
    split's class shares) fall below `chance`; or one value of a feature that marks exactly
    the rows of one class (a one-hot label column: odds 1 / C(rows, rows of the class));
    (b) for numeric targets, a feature whose values are an exact affine function of the
    target (|correlation| at least `min_corr`), or a monotone function of it (a binned copy:
    sorted by the target, the feature's values never go back), when the odds of such an order
    by chance (2 · Π n_v! / n! for the n_v rows of each value) fall below `chance`.

Why it matters
    The model learns to read the answer from that column: training and validation look
    excellent (often validation better than train, when a target encoding was fitted on every
    split) and the model is useless on data where the column is not known in advance.

Example
    ``Feature 'is_fraud_flag' determines the target in train and val: its 2 values that repeat
    each hold one class (480 distinct rows; under independence the odds are 1e-140).``

How to fix
    Drop the column from the inputs (a label copy, an outcome recorded after the fact, an id
    that encodes the class); fit target encodings on the training folds only (out of fold) and
    apply them to validation.

False positives
    Values that never repeat (ids, continuous measurements) carry no evidence and stay quiet;
    rows seen in several epochs or evaluations count once. A strongly but not perfectly
    predictive feature (one exception among the repeated values) stays quiet, as does a
    category that holds one class by chance (the odds must pass `chance`). Token ids are
    skipped (`module_shapes` shows an Embedding or EmbeddingBag reading a 2-D input of the
    inputs' shape, all whole numbers): their columns are positions sharing one vocabulary, not
    features, and a word that marks its class (a sentiment word) is the signal to learn.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tracelab.analyzers._dynamics import OUTCOME, fmt
from tracelab.analyzers._tokens import token_ids
from tracelab.core.causes import explains
from tracelab.core.findings import ERROR, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import Needs


@rule(name="data-leak", code="TL306", requires=(Needs.ROWS,), merge="feature", plot=Plot.NONE,
      links=(explains("loss-collapse", "overfitting", *OUTCOME,
                      why="a feature that holds the answer lets the loss fall to zero",
                      timing="overlap"),))
def data_leak(run: Run, *, chance: float = 1e-9, min_rows: int = 40, max_classes: int = 50,
              min_corr: float = 0.9999) -> list[Finding]:
    rows = run.rows
    found: dict[str, list[dict]] = {}
    if token_ids(run.inputs, run.meta):
        return []
    for split, part in rows.groupby("split", sort=False):
        table = part.pivot_table(index="row", columns="feature", values="value",
                                 aggfunc="first", sort=False)
        target = part.groupby("row", sort=False)["target"].first().reindex(table.index)
        table = table.assign(__target__=target.to_numpy()).drop_duplicates()
        y = table.pop("__target__").to_numpy(dtype=float)
        ok = np.isfinite(y)
        table, y = table[ok], y[ok]
        if len(y) < min_rows:
            continue
        classes = np.unique(y)
        if len(classes) < 2:
            continue
        whole = bool(np.all(y == np.round(y)))
        for feature in table.columns:
            x = table[feature].to_numpy(dtype=float)
            keep = np.isfinite(x)
            if keep.sum() < min_rows:
                continue
            if whole and len(classes) <= max_classes:
                hit = _determines(x[keep], y[keep], chance)
            else:
                hit = (_affine(x[keep], y[keep], min_corr)
                       or _monotone(x[keep], y[keep], chance))
            if hit:
                found.setdefault(str(feature), []).append({"split": str(split), **hit})
    findings = []
    steps = (int(rows["step"].min()), int(rows["step"].max())) if len(rows) else (0, 0)
    for feature, hits in found.items():
        splits = " and ".join(h["split"] for h in hits)
        h = hits[0]
        how = (f"each of its {h['repeated']} values that repeat holds one class ({h['rows']} "
               f"distinct rows; under independence the odds are {fmt(h['odds'])})"
               if h["kind"] == "classes" else
               f"its value {fmt(h['value'])} marks exactly the rows of class {fmt(h['label'])} "
               f"({h['rows']} distinct rows; by chance the odds are {fmt(h['odds'])}): a one-hot "
               f"label column" if h["kind"] == "indicator" else
               f"sorted by the target, its {h['values']} values never go back (a monotone "
               f"function of the target, a binned copy; {h['rows']} distinct rows, by chance "
               f"the odds are {fmt(h['odds'])})" if h["kind"] == "monotone" else
               f"its values are an affine function of the target (correlation "
               f"{h['corr']:.6f} over {h['rows']} distinct rows)")
        findings.append(data_leak.finding(
            ERROR, feature, steps,
            f"Feature '{feature}' determines the target in {splits}: {how}.",
            {"splits": [x["split"] for x in hits], **{k: v for k, v in h.items()
                                                       if k != "split"}},
            f"Drop '{feature}' from the inputs if it is the label or computed from it (an "
            "outcome recorded after the fact, an id that encodes the class); fit target "
            "encodings on the training folds only and apply them to validation."))
    return findings


def _determines(x: np.ndarray, y: np.ndarray, chance: float) -> dict | None:
    """Whether every repeated value of x holds one class, beyond `chance` odds."""
    frame = pd.DataFrame({"x": x, "y": y})
    groups = frame.groupby("x")["y"]
    size, distinct = groups.size(), groups.nunique()
    repeated = size[size >= 2]
    if len(repeated) < 2:
        return None
    if (distinct[repeated.index] > 1).any():
        return _indicator(frame, groups, chance)
    shares = frame["y"].value_counts(normalize=True).to_numpy()
    # log10 of the chance that all rows of each repeated value share one class.
    log_odds = sum(math.log10(float(np.sum(shares ** n))) for n in repeated.to_numpy())
    if log_odds > math.log10(chance):
        return None
    return {"kind": "classes", "repeated": int(len(repeated)), "rows": int(len(x)),
            "odds": 10.0 ** max(log_odds, -300)}


def _affine(x: np.ndarray, y: np.ndarray, min_corr: float) -> dict | None:
    if np.std(x) == 0 or np.std(y) == 0:
        return None
    corr = float(np.corrcoef(x, y)[0, 1])
    if not abs(corr) >= min_corr:
        return None
    return {"kind": "affine", "corr": corr, "rows": int(len(x))}


def _monotone(x: np.ndarray, y: np.ndarray, chance: float) -> dict | None:
    """Whether x is a monotone function of y beyond `chance` odds: ordered by y, x never
    decreases (or never increases), and y's ties hold one x (else x is no function of y)."""
    frame = pd.DataFrame({"x": x, "y": y})
    if (frame.groupby("y")["x"].nunique() > 1).any():
        return None
    steps = np.diff(frame.sort_values("y")["x"].to_numpy())
    if not ((steps >= 0).all() or (steps <= 0).all()):
        return None
    sizes = frame["x"].value_counts().to_numpy()
    if len(sizes) < 2:
        return None
    n = len(frame)
    # The odds that a random order puts each value's rows in one block, in order (or reverse).
    log_odds = (math.log(2) + sum(math.lgamma(k + 1) for k in sizes)
                - math.lgamma(n + 1)) / math.log(10)
    if log_odds > math.log10(chance):
        return None
    return {"kind": "monotone", "values": int(len(sizes)), "rows": int(n),
            "odds": 10.0 ** max(log_odds, -300)}


def _indicator(frame: pd.DataFrame, groups, chance: float) -> dict | None:
    """Whether one value of x marks exactly the rows of one class (a one-hot label column):
    the odds that a random split of the rows puts one class's n_c rows, and only those, under
    one value are 1 / C(n, n_c)."""
    n = len(frame)
    counts = frame["y"].value_counts()
    first = groups.first()
    pure = groups.nunique() == 1
    for value, size in groups.size()[pure].items():
        label = first[value]
        if size >= 2 and counts[label] == size and size < n:
            log_odds = -(math.lgamma(n + 1) - math.lgamma(size + 1)
                         - math.lgamma(n - size + 1)) / math.log(10)
            if log_odds <= math.log10(chance):
                return {"kind": "indicator", "value": float(value), "label": float(label),
                        "rows": int(n), "odds": 10.0 ** max(log_odds, -300)}
    return None

