"""Columns that arrive in another order: the permutation of one split's features that makes
their profiles match the reference split's.

A split built by position from a table whose columns are in another order holds every feature's
values under another feature's name: each differs from its namesake, and matches another one.
"""
from __future__ import annotations

import numpy as np

from tracelab.analyzers._input_table import ks_wasserstein_rows
from tracelab.analyzers._profiles import Profile

_FAR = 1e6  # the cost of pairing a constant with anything but the same constant


def distances(refs: list[Profile], others: list[Profile], *, pairs: bool = False
              ) -> np.ndarray:
    """[i, j]: how far others[j]'s summary is from refs[i]'s, in refs[i]'s stds (its range for
    the ends): a lower bound on the distance of the two distributions, from profiles alone.
    With `pairs`, only [i, i]: refs[i] against others[i], as a vector."""
    def stats(ps: list[Profile]) -> np.ndarray:
        return np.array([[p.mean, p.std, p.min, p.max] for p in ps], dtype=float).reshape(-1, 4).T

    (ma, sa, lo_a, hi_a), (mb, sb, lo_b, hi_b) = stats(refs), stats(others)
    if not pairs:
        ma, sa, lo_a, hi_a = (v[:, None] for v in (ma, sa, lo_a, hi_a))
    with np.errstate(invalid="ignore", divide="ignore"):
        cost = ((np.abs(ma - mb) + np.abs(sa - sb)) / sa
                + 0.25 * (np.abs(lo_a - lo_b) + np.abs(hi_a - hi_b)) / (hi_a - lo_a))
    same_constant = (lo_b == hi_b) & (lo_b == lo_a)
    cost = np.where(sa > 0, cost, np.where(same_constant, 0.0, _FAR))
    return np.where(np.isfinite(cost), cost, _FAR)


def reordered_between(pooled: list[tuple[str, dict]], ref: str, split: str, *, min_w: float,
                      gain: float) -> set[str]:
    """The features of `split` that `reordered` pairs with another feature of `ref`, judged
    on profiles alone (`pooled`: (feature, {split: Profile})), their partners too: the names
    whose comparison between the two splits means nothing."""
    both = [(f, by[ref], by[split]) for f, by in pooled if ref in by and split in by
            and by[ref].kind not in "MO" and by[split].kind not in "MO"]
    if len(both) < 2:
        return set()
    own = distances([a for _, a, _ in both], [b for _, _, b in both], pairs=True)
    differ = [{"feature": f, "ref": a, "other": b} for (f, a, b), d in zip(both, own)
              if d >= min_w]
    moved = reordered(differ, {}, min_w=min_w, min_ks=1.0, gain=gain)
    return {m["feature"] for m in moved} | {m["holds"] for m in moved}


def reordered(differ: list[dict], samples: dict, *, min_w: float, min_ks: float,
              gain: float) -> list[dict]:
    """The features of `differ` (train-val-mismatch's results: "feature", "ref", "other") that
    match another differing feature far better than their namesake, as {"feature": the other
    split's column, "holds": the reference feature whose values it holds, "cost", "namesake"}.

    The best one-to-one matching of the differing features (scipy's linear_sum_assignment) is
    kept where it is not the identity, the matched distance is below `min_w` and `gain` times
    below the namesake's, and, where samples of both are recorded (`samples`: feature →
    (reference values, other values)), their KS statistic stays below `min_ks`. Empty unless
    at least two features and half of `differ` are explained so.
    """
    if len(differ) < 2:
        return []
    from scipy.optimize import linear_sum_assignment

    cost = distances([r["ref"] for r in differ], [r["other"] for r in differ])
    quantiles = _quantiles(differ, samples)
    if quantiles is not None:  # finer than the summaries: twins of one mean and std differ
        a, b = quantiles
        scale = np.array([r["ref"].std for r in differ])[:, None]
        w = np.empty_like(cost)
        for at in range(0, len(a), 64):  # blocks of rows: the temporary stays small
            w[at:at + 64] = np.abs(a[at:at + 64, None, :] - b[None, :, :]).mean(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            w /= scale
        cost = np.where(np.isfinite(w) & (scale > 0), w, cost)
    rows, cols = linear_sum_assignment(cost)
    moved = []
    pairs = [(i, j) for i, j in zip(rows.tolist(), cols.tolist())
             if i != j and cost[i, j] < min_w and cost[i, j] * gain <= cost[i, i]]
    ks = _ks([(samples.get(differ[i]["feature"], (None, None))[0],
               samples.get(differ[j]["feature"], (None, None))[1]) for i, j in pairs])
    for (i, j), d in zip(pairs, ks):
        if d >= min_ks:
            continue
        # How much worse the next best partner fits: near twins (pixels that are almost
        # always 0) pair with either, and are named last.
        runner_up = float(np.min(np.delete(cost[i], j)))
        moved.append({"feature": differ[j]["feature"], "holds": differ[i]["feature"],
                      "cost": float(cost[i, j]), "namesake": float(cost[i, i]),
                      "margin": runner_up - float(cost[i, j])})
    if len(moved) < max(2, len(differ) / 2):
        return []
    moved.sort(key=lambda m: -m["margin"])
    return moved


_LEVELS = np.linspace(0.01, 0.99, 33)


def _quantiles(differ: list[dict], samples: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """Each differing feature's sampled quantiles on both sides (the 1-Wasserstein distance of
    two features is about the mean gap of their quantiles), or None unless all are sampled."""
    pairs = [samples.get(r["feature"], (None, None)) for r in differ]
    if any(a is None or b is None or not len(a) or not len(b) for a, b in pairs):
        return None
    return (np.array([np.quantile(a, _LEVELS) for a, _ in pairs]),
            np.array([np.quantile(b, _LEVELS) for _, b in pairs]))


def _ks(pairs: list[tuple]) -> list[float]:
    """The KS statistic of each (x, y) pair of samples (0 where either is missing), one call
    of `ks_wasserstein_rows` per pair of sample sizes."""
    out = [0.0] * len(pairs)
    sizes: dict[tuple[int, int], list[int]] = {}
    for k, (x, y) in enumerate(pairs):
        if x is not None and y is not None and len(x) and len(y):
            sizes.setdefault((len(x), len(y)), []).append(k)
    for at in sizes.values():
        ks = ks_wasserstein_rows(np.stack([pairs[k][0] for k in at]),
                                 np.stack([pairs[k][1] for k in at]))[0]
        for k, d in zip(at, ks.tolist()):
            out[k] = d
    return out
