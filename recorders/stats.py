"""Tensor statistics computed on the tensors' own device with few fused ops and no host sync.

The device side returns raw aggregates per tensor, stacked into one tensor so that a step's
statistics travel to the host in a single copy. On the CPU the recorder reads the tensors in
place with numba_kernels.tensor_stats instead, and `raw_stats` serves other layouts and dtypes.
`finish()` turns the aggregates into the trace's columns on the host (the writer thread);
`dense_equivalent` gives a sparse grad a strided stand-in with the same statistics.
Aggregates are exact in float64 for tensors whose mean dwarfs their spread (BatchNorm weights
near 1): on accelerators and in the kernels always, in CPU torch for the tensors that need it.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from tracelab.core.schema import TENSOR_STATS

_HALF = (torch.float16, torch.bfloat16)
# Columns of the raw aggregate tensor.
RAW = ("sum", "l2", "l1", "nonzero", "max", "negmin", "nan", "inf")


def raw_stats(tensors: list[torch.Tensor]) -> torch.Tensor:
    """[len(tensors), len(RAW)] float64 aggregates, on the tensors' device."""
    ts = [t.detach() for t in tensors]
    ts = [t if t.is_floating_point() else t.double() for t in ts]
    # An empty tensor (a rank's empty shard) has no extremes: NaN, as the kernels give. Sizes
    # are host metadata, so asking costs no sync.
    ext = [t if t.numel() else t.new_full((1,), math.nan) for t in ts]
    if ts[0].device.type == "cpu":
        # CPU reductions of half types return half results, which overflow at 65504.
        return _raw_stats_cpu([t.float() if t.dtype in _HALF else t for t in ts],
                              [t.float() if t.dtype in _HALF else t for t in ext])
    # On an accelerator the reductions are memory-bound: accumulate in float64 for free, and
    # never branch on values (that would sync the host).
    f64 = torch.float64
    l2 = torch.stack(torch._foreach_norm(ts, 2, dtype=f64))
    cols = [torch.stack([t.sum(dtype=f64) for t in ts]), l2,
            torch.stack(torch._foreach_norm(ts, 1, dtype=f64)),
            torch.stack(torch._foreach_norm(ts, 0, dtype=f64)),
            torch.stack(torch._foreach_max(ext)).to(f64),
            torch.stack(torch._foreach_max(torch._foreach_neg(ext))).to(f64),
            torch.stack([torch.isnan(t).sum() for t in ts]).to(f64),
            torch.stack([torch.isinf(t).sum() for t in ts]).to(f64)]
    return torch.stack(cols, dim=1)


def _raw_stats_cpu(ts: list[torch.Tensor], ext: list[torch.Tensor]) -> torch.Tensor:
    # On the CPU, float64 accumulation of float32 data runs 3-5x slower than the vectorized
    # float32 kernels, and reading values costs nothing: accumulate in float32, then redo in
    # float64 only the tensors whose std would lose digits to E[x^2] - E[x]^2 cancellation.
    minmax = [torch.aminmax(t) for t in ext]
    cols = [torch.stack([t.sum() for t in ts]), torch.stack(torch._foreach_norm(ts, 2)),
            torch.stack(torch._foreach_norm(ts, 1)),
            torch.stack([torch.count_nonzero(t) for t in ts]),
            torch.stack([m.max for m in minmax]), torch.stack([m.min for m in minmax])]
    raw = np.zeros((len(ts), len(RAW)))
    for i, col in enumerate(cols):
        raw[:, i] = col.numpy()
    raw[:, 5] *= -1
    for i in np.flatnonzero(~np.isfinite(raw[:, 1])):
        raw[i, 6], raw[i, 7] = torch.isnan(ts[i]).sum(), torch.isinf(ts[i]).sum()
    _exact_spread_cpu(raw, [t.numpy() for t in ts])
    return torch.from_numpy(raw)


def _exact_spread_cpu(raw: np.ndarray, ts: list[np.ndarray]) -> None:
    """Redo sum and norm in float64 where std would lose digits to cancellation (in place)."""
    n = np.array([max(t.size, 1) for t in ts], dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        mean_sq = raw[:, 1] ** 2 / n
        spread = mean_sq - (raw[:, 0] / n) ** 2
        redo = (spread < 1e-4 * mean_sq) & (mean_sq > 0) & np.isfinite(mean_sq)
    for i in np.flatnonzero(redo):
        exact = np.asarray(ts[i], dtype=np.float64).reshape(-1)
        raw[i, 0], raw[i, 1] = exact.sum(), np.sqrt(np.square(exact).sum())


def finish(raw: np.ndarray, numel: np.ndarray) -> dict[str, np.ndarray]:
    """Raw aggregates to the trace's TENSOR_STATS columns (host side)."""
    s, l2, l1, nonzero, mx, negmin, nan, inf = (raw[:, i] for i in range(len(RAW)))
    n = numel.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = s / n
        var = (l2 * l2 - s * s / n) / (n - 1)
        std = np.sqrt(np.maximum(var, 0.0))  # NaN where var is NaN: maximum propagates it
        abs_mean, zero_frac = l1 / n, 1.0 - nonzero / n
    return dict(zip(TENSOR_STATS, (numel.astype(np.int64), mean, std, -negmin, mx, abs_mean, l2,
                                   zero_frac, nan.astype(np.int64), inf.astype(np.int64))))


def dense_equivalent(t: torch.Tensor) -> torch.Tensor:
    """A strided tensor with the same statistics as t, given t's numel (sparse grads).

    A sparse tensor's statistics are those of its values plus its implicit zeros, and one zero
    stands for them all in the sums, extremes and non-zero count.
    """
    if t.layout == torch.strided:
        return t
    values = t.coalesce().values().reshape(-1) if t.layout == torch.sparse_coo else \
        t.to_dense().reshape(-1)
    if values.numel() < t.numel():
        values = torch.cat([values, values.new_zeros(1)])
    return values


def reference_stats(t: torch.Tensor) -> dict[str, float]:
    """The same statistics in plain torch, one tensor at a time (tests and documentation).

    Named one by one, not in TENSOR_STATS order: the reference shares nothing with `finish`."""
    t = t.detach().double()
    return {"numel": t.numel(), "mean": t.mean().item(), "std": t.std().item(),
            "min": t.min().item(), "max": t.max().item(), "abs_mean": t.abs().mean().item(),
            "norm": t.norm().item(), "zero_frac": (t == 0).double().mean().item(),
            "nan_count": int(torch.isnan(t).sum()), "inf_count": int(torch.isinf(t).sum())}
