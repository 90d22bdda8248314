"""overfitting: the validation loss rises while the training loss keeps falling.

What it detects
    A validation loss that reached its best value at some evaluation (on a 3-evaluation rolling
    median) and then rose, for at least `patience` later evaluations, by `min_rise` or more of
    its best value, while the training loss went on falling over the same steps by
    `min_train_drop` and now lies at least `min_gap` below the validation loss. Where the
    split also logs a metric whose name says which way is better (accuracy, F1, error...),
    that metric must have worsened too: its last `patience` evaluations' median lies below its
    best (3-evaluation rolling median) by more than `noise_k` times its own noise. The finding
    reports the best step: the checkpoint to keep.

Why it matters
    Past the best step, more training makes the model worse on unseen data while every training
    curve still looks like progress. The final weights are not the ones to ship.

Example
    Validation loss best at step 1200 (0.41), 0.58 at the last evaluation (step 3000), while
    the training loss went from 0.35 to 0.09.

How to fix
    Stop early at the best step (or keep the best checkpoint), and regularize: weight decay,
    dropout, data augmentation, a smaller model or more data.

False positives
    A single noisy evaluation cannot fire the rule: the rise is measured on the median of the
    last `patience` evaluations, it must exceed `noise_k` times the evaluations' own noise
    (estimated from their step-to-step differences), and the evaluations after the best must
    rise as a trend (rank correlation with time of at least `min_trend`). A validation loss
    that rises while the split's own metric holds its best is no failure: a classifier grown
    overconfident on the examples it gets wrong (its loss rises, its accuracy does not fall), a
    validation objective that is not the training one (SimCSE's in-batch contrastive loss on
    pairs of sentences of one topic, judged by its retrieval accuracy), or a small validation
    set whose accuracy fell by fewer examples than its sampling noise (a binomial standard
    error sqrt(p(1 - p) / n) over the n targets evaluated, next to the step-to-step noise). Such
    a metric, when logged, keeps the rule quiet; a run that logs none is judged on its loss
    alone. Validation losses that are not comparable across steps (a validation set that
    changes each time) may still mislead it.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracelab.analyzers._dynamics import MAD_TO_STD, eval_split, finite, fmt
from tracelab.analyzers._objectives import run_direction
from tracelab.core.findings import WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import LOSS_NAME, Needs


@rule(name="overfitting", code="TL105", requires=(Needs.LOSS, Needs.EVAL), plot=Plot.TRAIN_VS_EVAL)
def overfitting(run: Run, *, patience: int = 3, min_rise: float = 0.1,
                min_train_drop: float = 0.05, min_gap: float = 0.1,
                noise_k: float = 3.0, min_trend: float = 0.5) -> list[Finding]:
    split = eval_split(run, LOSS_NAME)
    if split is None:
        return []
    val = finite(run.loss(split))
    train = finite(run.loss())
    if len(val) < patience + 2 or len(train) < 2:
        return []
    # The best of a noisy curve is biased low: judge against a 3-evaluation rolling median.
    smooth = val.rolling(3, center=True, min_periods=1).median()
    best_i = int(np.argmin(smooth.to_numpy()))
    after = val.iloc[best_i + 1:]
    if len(after) < patience:
        return []
    best_step, best = int(val.index[best_i]), float(smooth.iloc[best_i])
    final = float(after.iloc[-patience:].median())
    rise = (final - best) / max(abs(best), 1e-12)
    last = int(val.index[-1])
    train_best = _train_near(train, best_step)
    train_end = _train_near(train, last)
    train_drop = (train_best - train_end) / max(abs(train_best), 1e-12)
    gap = (final - train_end) / max(abs(train_end), 1e-12)
    # Evaluation noise (from step-to-step differences) raises the bar for a noisy curve.
    noise = MAD_TO_STD * float(np.median(np.abs(np.diff(val.to_numpy())))) / np.sqrt(2)
    needed = max(min_rise, noise_k * noise / max(abs(best), 1e-12))
    trend = _rank_correlation(val.iloc[best_i:].to_numpy())
    if rise < needed or trend < min_trend or train_drop < min_train_drop or gap < min_gap:
        return []
    judged = _metric_drops(run, split, patience=patience, noise_k=noise_k)
    if judged and not any(drop["hurt"] for drop in judged.values()):
        return []  # the split's own metrics held their best: the loss alone is no failure
    hurt = {name: drop for name, drop in judged.items() if drop["hurt"]}
    return [overfitting.finding(
        WARNING, f"{split} loss", (best_step, last),
        f"Validation loss was best at step {best_step} ({fmt(best)}) and rose to {fmt(final)} "
        f"by step {last} (+{fmt(100 * rise)}%) while the train loss fell from "
        f"{fmt(train_best)} to {fmt(train_end)}.",
        {"best_step": best_step, "best_val_loss": best, "final_val_loss": final,
         "val_rise": rise, "train_loss_at_best": train_best, "train_loss_at_end": train_end,
         "generalization_gap": gap, "trend": trend, "metrics_worse": hurt},
        f"Keep the checkpoint of step {best_step} (early stopping) and add regularization "
        "(weight decay, dropout, augmentation).")]


# A share of examples counted right: its sampling noise is binomial over the targets evaluated.
_PROPORTION = re.compile(r"acc", re.IGNORECASE)


def _metric_drops(run: Run, split: str, *, patience: int, noise_k: float) -> dict[str, dict]:
    """For each metric of `split` whose name says which way is better (`run_direction`), how
    far its last `patience` evaluations' median lies below its best (3-evaluation rolling
    median, oriented so that higher is better), and whether that drop exceeds `noise_k` times
    its noise: the step-to-step noise, or for an accuracy in [0, 1] (or percent) the binomial
    standard error over the targets evaluated at the share between its best and its end (a
    pooled share: one example lost from 100% is no drop), whichever is larger. Metrics with
    fewer than `patience + 2` finite evaluations are not judged."""
    try:
        sc = run.scalars
        names = sc.loc[(sc["split"] == split) & (sc["name"] != LOSS_NAME), "name"].unique()
    except (KeyError, AttributeError, TypeError):
        return {}
    out = {}
    for name in names:
        try:
            sign = run_direction(run, split, name)
            values = finite(run.scalar(str(name), split)).groupby(level=0).last()
        except (KeyError, ValueError, TypeError):
            continue
        if sign == 0 or len(values) < patience + 2:
            continue
        good = sign * values.to_numpy(dtype=float)
        best = float(pd.Series(good).rolling(3, center=True, min_periods=1).median().max())
        final = float(np.median(good[-patience:]))
        noise = MAD_TO_STD * float(np.median(np.abs(np.diff(good)))) / np.sqrt(2)
        if sign > 0 and _PROPORTION.search(str(name)):
            noise = max(noise, _binomial_noise(run, split, (best + final) / 2))
        out[str(name)] = {"best": sign * best, "final": sign * final,
                          "hurt": bool(best - final > noise_k * noise)}
    return out


def _binomial_noise(run: Run, split: str, share: float) -> float:
    """Standard error of a share `share` (rescaled from percent) measured on the split's
    evaluated targets (median count per evaluation); 0 when no targets were recorded."""
    if 1.0 < share <= 100.0:
        share /= 100.0
    if not 0.0 <= share <= 1.0:
        return 0.0
    try:
        targets = run.targets
        rows = targets[targets["split"] == split]
        counts = rows.groupby(["step", "feature"])["count"].sum().groupby(level=0).max()
        n = float(counts.median()) if len(counts) else 0.0
    except (KeyError, AttributeError, TypeError, ValueError):
        return 0.0
    if not np.isfinite(n) or n < 1:
        return 0.0
    return float(np.sqrt(share * (1.0 - share) / n))


def _train_near(train, step: int, width: int = 20) -> float:
    """Median train loss over the `width` recorded steps up to `step` (minibatch noise)."""
    upto = train[train.index <= step]
    if upto.empty:
        upto = train.iloc[:1]
    return float(upto.iloc[-width:].median())


def _rank_correlation(values) -> float:
    """Spearman correlation of the values with their order: 1 for a steady rise."""
    if len(values) < 3:
        return 0.0
    ranks = np.argsort(np.argsort(values))
    return float(np.corrcoef(np.arange(len(values)), ranks)[0, 1])
