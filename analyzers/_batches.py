"""What the rules read of the batches: the per-batch sentinel (the batches table: every step's
input and target tensors' min, max and NaN/Inf counts, so that a spike or a NaN is traced to its
batch at any step, profiled or not), the shapes of the batches each module was given (meta.json's
module_shapes), and which modules normalize with their batch's statistics. Pure functions; no
rule lives here."""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from scipy.stats import mannwhitneyu

from tracelab.analyzers._loss_contracts import mean_reduced
from tracelab.core.rules import Unseen
from tracelab.core.run import Run
from tracelab.core.schema import TRAIN

# BatchNorm's module types: torch.nn.modules.batchnorm._BatchNorm's subclasses, the modules the
# recorder counts as BatchNorm (train_mode/batchnorm, modules/batchnorm). In training mode each
# normalizes with the mean and variance of the batch it is given.
BATCH_NORMS = frozenset({"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LazyBatchNorm1d",
                         "LazyBatchNorm2d", "LazyBatchNorm3d", "SyncBatchNorm"})
# Those whose batch statistics pool the batches of every process, not this process's batch.
POOLED_BATCH_NORMS = frozenset({"SyncBatchNorm"})


def input_shapes(calls: Any) -> list[list[int]]:
    """Each recorded call's first input shape, from a module's entry in meta.json's
    module_shapes (a list of {"inputs": [shape, ...], "output": shape}): the shapes that are
    lists of integers. Never raises: a malformed entry (a scalar, an empty or missing inputs
    list, a string, a shape holding something else than integers) is left out."""
    found = []
    for call in calls if isinstance(calls, list) else []:
        inputs = call.get("inputs") if isinstance(call, dict) else None
        first = inputs[0] if isinstance(inputs, list) and inputs else None
        if isinstance(first, list) and all(isinstance(n, int) and not isinstance(n, bool)
                                           for n in first):
            found.append(list(first))
    return found


# What names a finding's input cause at its step, for the rules that blame a batch.
INPUT_BATCH = Unseen("the input batch", "record every batch's inputs: Recorder(input_every=1)")


class BatchEvidence(NamedTuple):
    role: str  # "input" or "target"
    name: str  # the tensor: "input", "target", a dict key, input0, ...
    value: float  # NaN/Inf count, or the magnitude ratio to the usual


def sentinel(run: Run, split: str = TRAIN) -> pd.DataFrame:
    """The split's sentinel rows (one rank's: the lowest that recorded each step)."""
    b = run.batches
    rows = b[b["split"] == split]
    if "rank" in rows and len(rows):
        rows = rows[rows["rank"] == rows.groupby("step")["rank"].transform("min")]
    return rows


def nonfinite_batch(run: Run, step: int) -> BatchEvidence | None:
    """The first tensor of the train batch of `step` holding NaN or Inf, with their count."""
    rows = sentinel(run)
    rows = rows[rows["step"] == step]
    bad = rows[(rows["nan_count"].fillna(0) + rows["inf_count"].fillna(0)) > 0]
    if not len(bad):
        return None
    row = bad.iloc[0]
    return BatchEvidence(str(row["role"]), str(row["name"]),
                         float(row["nan_count"] or 0) + float(row["inf_count"] or 0))


def outlier_batch(run: Run, step: int, since: int, ratio: float,
                  min_prior: int = 3) -> BatchEvidence | None:
    """The tensor of the train batch of `step` whose largest magnitude is at least `ratio`
    times its median over the steps since `since` (the largest such ratio), or None. A tensor
    whose batches swing that far on their own all through the run (a heavy-tailed input: a
    polynomial's x ** 4 feature, and the target built from it) is held to its own tail instead
    (`batch_tail`: what the largest of the run's batches reaches by chance)."""
    rows = sentinel(run)
    if not len(rows):
        return None
    mag = np.maximum(rows["max"].abs(), rows["min"].abs()).astype(float)
    rows = rows.assign(mag=mag.where(np.isfinite(mag)))
    best = None
    for (role, name), whole in rows.groupby(["role", "name"], sort=False):
        group = whole[(whole["step"] >= since) & (whole["step"] <= step)]
        now = group.loc[group["step"] == step, "mag"]
        prior = group.loc[group["step"] < step, "mag"].dropna()
        if not len(now) or len(prior) < min_prior or not np.isfinite(now.iloc[-1]):
            continue
        usual = float(prior.median())
        value = now.iloc[-1] / usual if usual > 0 else 0.0
        if value >= ratio and (best is None or value > best.value) and \
                value > batch_tail(whole, max(step - since, min_prior)):
            best = BatchEvidence(str(role), str(name), float(value))
    return best


def batch_tail(rows: pd.DataFrame, window: int, alpha: float = 0.05) -> float:
    """How far one tensor's batch magnitude (`rows`: its sentinel rows with their `mag`, the
    whole run) reaches above its median over the `window` steps before by chance, from its own
    batches: the ratios of each batch's magnitude to that median, on the log scale, given an
    exponential tail through their 75th and 95th percentiles (a power-law tail of the ratios,
    as a polynomial's x ** 4 feature or a heavy-tailed target has; a lighter tail lies within
    it), reach this level with probability `alpha` over all the run's batches together (the
    largest of N batches, not one batch). 0 where it cannot be judged (fewer than `window`
    ratios), so that a fixed ratio alone decides."""
    mag = pd.Series(rows["mag"].to_numpy(dtype=float), index=rows["step"].to_numpy())
    mag = mag.groupby(level=0).max().sort_index().to_numpy(dtype=float)
    mag = mag[np.isfinite(mag)]
    if len(mag) <= 2 * window:
        return 0.0
    usual = np.median(np.lib.stride_tricks.sliding_window_view(mag[:-1], window), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = np.log(mag[window:] / usual)
    ratios = ratios[np.isfinite(ratios)]
    if len(ratios) < window:
        return 0.0
    q75, q95 = np.quantile(ratios, [0.75, 0.95])
    scale = (q95 - q75) / np.log(0.25 / 0.05)  # the tail's scale: P(r > q) = 0.25 e^-(q-q75)/s
    return float(np.exp(q75 + scale * np.log(0.25 * len(ratios) / alpha)))


def batch_sizes(run: Run) -> pd.Series:
    """The size of each profiled train batch (the largest `count` of a feature at a step),
    indexed by step; empty where no batch was profiled or the inputs table is malformed."""
    try:
        rows = run.inputs
        rows = rows[rows["split"] == TRAIN]
        return pd.to_numeric(rows["count"], errors="coerce").groupby(
            rows["step"].to_numpy()).max().sort_index()
    except (KeyError, ValueError, TypeError, AttributeError):
        return pd.Series(dtype=float)


def sums_over_batch(run: Run, *, min_batches: int = 4, spread: float = 2.0,
                    min_slope: float = 0.5) -> float | None:
    """The slope of log(loss) on log(batch size) over the profiled train batches, where the
    batches' sizes (the largest `count` of a feature at a step) vary `spread`-fold or more
    over `min_batches` positive losses or more and the slope is `min_slope` or more; None
    otherwise. A loss summed over its batch grows with it (slope 1), a mean does not (0):
    above one half, the loss per sample varies less than the loss, and the loss is read as a
    sum over batches whose size varies (an episode's rollout, whose length grows as a policy
    learns; variable-length sequences), whose jumps follow the batch's size, recorded only on
    profiled steps. False (None) where the sizes are steady or missing, and where the loss is
    recorded as a mean (`mean_reduced`): a mean does not grow with its batch, and a small last
    batch (drop_last=False) that happens to meet a high loss only fakes the slope."""
    if mean_reduced(run):
        return None
    size = batch_sizes(run)
    try:
        loss = run.loss()
        loss = loss[~loss.index.duplicated(keep="last")]
        both = size.index.intersection(loss.index)
        n = size.reindex(both).to_numpy(dtype=float, na_value=np.nan)
        values = pd.to_numeric(loss.reindex(both), errors="coerce").to_numpy(
            dtype=float, na_value=np.nan)
    except (KeyError, ValueError, TypeError, AttributeError):
        return None
    ok = np.isfinite(n) & (n > 0) & np.isfinite(values) & (values > 0)
    n, values = n[ok], values[ok]
    if len(n) < min_batches or not n.max() >= spread * n.min():
        return None
    x, y = np.log(n), np.log(values)
    slope = float(np.sum((x - x.mean()) * (y - y.mean())) / np.sum((x - x.mean()) ** 2))
    return slope if slope >= min_slope else None


def targets_drift(run: Run, *, factor: float = 2.0, min_batches: int = 16,
                  alpha: float = 0.05) -> float | None:
    """How many times the recorded real-valued train targets' scale (per profiled batch, the
    root mean square sqrt(mean ** 2 + std ** 2), averaged over target columns) moved between
    the first and the last quarter of the profiled batches, by the ratio of their medians (the
    larger over the smaller), where that is `factor` or more over `min_batches` batches or
    more and the two quarters' batches differ beyond their own noise (a one-sided Mann-Whitney
    test, p < `alpha`, in the ratio's direction); None otherwise (integer targets, too few
    batches, a steady scale). A fixed data set sampled at random keeps its targets' scale from
    batch to batch: the medians of a few heavy-tailed batches can still differ twice over."""
    try:
        rows = run.targets
        rows = rows[(rows["split"] == TRAIN) & (rows["count"] > 1)]
        rows = rows[rows["dtype"].astype(str).str.contains("float")
                    & (rows["int_frac"].astype(float) < 0.5)]
        mean, std = rows["mean"].astype(float), rows["std"].astype(float)
        rms = pd.Series(np.sqrt(mean ** 2 + std ** 2).to_numpy(), index=rows["step"].to_numpy())
        rms = rms[np.isfinite(rms.to_numpy())].groupby(level=0).mean().sort_index()
    except (KeyError, ValueError, TypeError, AttributeError):
        return None
    if len(rms) < min_batches:
        return None
    quarters = np.array_split(rms.to_numpy(dtype=float), 4)
    first, last = float(np.median(quarters[0])), float(np.median(quarters[-1]))
    if not (first > 0 and last > 0):
        return None
    ratio = max(first, last) / min(first, last)
    if ratio < factor:
        return None
    try:
        p = float(mannwhitneyu(quarters[-1], quarters[0],
                               alternative="greater" if last > first else "less").pvalue)
    except ValueError:
        return None
    return ratio if p < alpha else None
