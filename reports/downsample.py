"""Downsampling that keeps extremes: what the charts and their static SVGs draw of a long series.

No averaging: every bucket keeps its lowest and highest point, so a one-step spike stays
visible at any zoom.
"""
from __future__ import annotations

import numpy as np


def minmax(x: np.ndarray, y: np.ndarray, buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """At most about 2 * buckets points: per bucket of x-order, its minimum and maximum y, in
    order, and the first gap (a non-finite y) of each bucket, so a gap stays a gap.

    Extremes are never averaged away: a one-step spike is kept at any zoom.
    """
    n = len(x)
    if n <= 2 * buckets:
        return x, y
    width = -(-n // buckets)
    pad = width * buckets - n
    finite = np.isfinite(y)
    grid_lo = np.r_[np.where(finite, y, np.inf), np.full(pad, np.inf)].reshape(buckets, width)
    grid_hi = np.r_[np.where(finite, y, -np.inf), np.full(pad, -np.inf)].reshape(buckets, width)
    base = np.arange(buckets) * width
    has = np.isfinite(grid_lo).any(axis=1)
    keep = [base[has] + grid_lo[has].argmin(axis=1), base[has] + grid_hi[has].argmax(axis=1),
            [0, n - 1]]
    gaps = np.r_[~finite, np.zeros(pad, bool)].reshape(buckets, width)
    holed = gaps.any(axis=1)
    keep.append(base[holed] + gaps[holed].argmax(axis=1))
    idx = np.unique(np.concatenate(keep))
    idx = idx[idx < n]
    return x[idx], y[idx]


def envelope_minmax(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, buckets: int):
    """A band on at most `buckets` points: each bucket's lowest lo and highest hi."""
    n = len(x)
    if n <= buckets:
        return x, lo, hi
    at = np.linspace(0, n, buckets + 1).astype(int)[:-1]
    return x[at], np.fmin.reduceat(lo, at), np.fmax.reduceat(hi, at)
