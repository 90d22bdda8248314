"""What a split is, from its own profiles: split by a feature (a chronological split by year),
or not a fixed set at all (a GAN's generated samples logged as validation inputs).

train-val-mismatch compares a split with train as two samples of one distribution; these say
where that premise does not hold.
"""
from __future__ import annotations

import math

import numpy as np

from tracelab.analyzers._input_table import derived
from tracelab.analyzers._profiles import Profile, feature_profiles


def split_key(ref: Profile, other: Profile) -> bool:
    """Whether `other`'s values continue `ref`'s range past one end (the next years of a
    chronological split: at or beyond train's last value, within one train std of it): the
    feature the rows were split by, which differs by design."""
    if not (np.isfinite([ref.min, ref.max, other.min, other.max]).all() and ref.std > 0):
        return False
    after = other.min >= ref.max and other.min - ref.max <= ref.std
    before = other.max <= ref.min and ref.min - other.max <= ref.std
    return after or before


def drifting(inputs, split: str, *, min_w: float, min_z: float, share: float) -> bool:
    """Whether `split`'s inputs change between its first and its last evaluation by more than
    sampling noise and by `min_w` of its std in at least `share` of its features: generated
    samples (a GAN's), not a fixed set of rows that every evaluation reads again."""
    moved = judged = 0
    for _, by_split, pooled in feature_profiles(inputs):
        rows, p = by_split.get(split), pooled.get(split)
        if rows is None or p is None or p.kind in "MO" or not p.std > 0:
            continue
        step = rows["step"]
        first, last = step == step.min(), step == step.max()
        if not last.any() or step.min() == step.max():
            continue
        means = [_pooled_mean(rows["mean"][at], rows["count"][at]) for at in (first, last)]
        counts = [float(np.nansum(rows["count"][at])) for at in (first, last)]
        if not all(math.isfinite(m) for m in means) or min(counts) < 2:
            continue
        judged += 1
        gap = abs(means[1] - means[0])
        noise = p.std * math.sqrt(1 / counts[0] + 1 / counts[1])
        moved += gap >= min_w * p.std and gap >= min_z * noise
    return judged > 0 and moved >= share * judged


def _pooled_mean(means: np.ndarray, counts: np.ndarray) -> float:
    ok = np.isfinite(means) & (counts > 0)
    return float(np.sum(means[ok] * counts[ok]) / np.sum(counts[ok])) if ok.any() else math.nan


def repeated_rows(inputs, split: str) -> float | None:
    """The rows of `split`'s one batch where every step of it reads the same rows again (a
    full-batch training set, a fixed validation set evaluated whole): every feature records
    the same count, mean, std and range at every one of at least two steps. Values sampled
    across those steps are draws from these rows, never more information than they hold; None
    where some batch differs (minibatches) or nothing says so."""
    return derived(inputs, _repeated_rows).get(split)


def _repeated_rows(inputs) -> dict[str, float]:
    out: dict[str, float] = {}
    seen: dict[str, bool] = {}
    for _, by_split, _ in feature_profiles(inputs):
        for split, rows in by_split.items():
            if seen.get(split) is False:
                continue
            try:
                steps = np.asarray(rows["step"])
                stats = np.column_stack([np.asarray(rows[k], dtype=float)
                                         for k in ("count", "mean", "std", "min", "max")])
            except (KeyError, TypeError, ValueError):
                seen[split] = False
                continue
            stats = np.nan_to_num(stats, nan=np.inf)
            same = (len(steps) >= 2 and len(np.unique(steps)) == len(steps)
                    and bool((stats == stats[0]).all()) and stats[0, 0] > 0)
            seen[split] = same
            if same:
                out[split] = max(out.get(split, 0.0), float(stats[0, 0]))
    return {s: n for s, n in out.items() if seen.get(s)}
