"""Tensor statistics computed on the tensors' own device with few fused ops and no host sync.

The device side returns raw aggregates per tensor, stacked into one tensor so that a step's
statistics travel to the host in a single copy. `finish()` turns them into the trace's columns on
the host (the writer thread). Aggregates are exact in float64 for tensors
whose mean dwarfs their spread (BatchNorm weights near 1): on accelerators always, on the CPU for
the tensors that need it.
"""
from __future__ import annotations

import math

import numpy as np
import torch

_HALF = (torch.float16, torch.bfloat16)
# Columns of the raw aggregate tensor.
RAW = ("sum", "l2", "l1", "nonzero", "max", "negmin", "nan", "inf")


def raw_stats(tensors: list[torch.Tensor]) -> torch.Tensor:
    """[len(tensors), len(RAW)] float64 aggregates, on the tensors' device."""
    ts = [t.detach() for t in tensors]
    ts = [t if t.is_floating_point() else t.double() for t in ts]
    if ts[0].device.type == "cpu":
        # CPU reductions of half types return half results, which overflow at 65504.
        return _raw_stats_cpu([t.float() if t.dtype in _HALF else t for t in ts])
    # On an accelerator the reductions are memory-bound: accumulate in float64 for free, and
    # never branch on values (that would sync the host).
    f64 = torch.float64
    l2 = torch.stack(torch._foreach_norm(ts, 2, dtype=f64))
    cols = [torch.stack([t.sum(dtype=f64) for t in ts]), l2,
            torch.stack(torch._foreach_norm(ts, 1, dtype=f64)),
            torch.stack(torch._foreach_norm(ts, 0, dtype=f64)),
            torch.stack(torch._foreach_max(ts)).to(f64),
            torch.stack(torch._foreach_max(torch._foreach_neg(ts))).to(f64),
            torch.stack([torch.isnan(t).sum() for t in ts]).to(f64),
            torch.stack([torch.isinf(t).sum() for t in ts]).to(f64)]
    return torch.stack(cols, dim=1)


def _raw_stats_cpu(ts: list[torch.Tensor]) -> torch.Tensor:
    # On the CPU, float64 accumulation of float32 data runs 3-5x slower than the vectorized
    # float32 kernels, and reading values costs nothing: accumulate in float32, then redo in
    # float64 only the tensors whose std would lose digits to E[x^2] - E[x]^2 cancellation.
    minmax = [torch.aminmax(t) for t in ts]
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
    _exact_spread_cpu(raw, ts)
    return torch.from_numpy(raw)


def _exact_spread_cpu(raw: np.ndarray, ts: list[torch.Tensor],
                      n_total: list[int] | None = None) -> None:
    """Redo sum and norm in float64 where std would lose digits to cancellation (in place).

    `ts` may be subsamples standing for `n_total` elements each; the redo scales like the
    first pass did.
    """
    n = np.array([max(t.numel(), 1) for t in ts], dtype=np.float64)
    total = np.asarray(n_total, dtype=np.float64) if n_total else n
    with np.errstate(invalid="ignore", over="ignore"):
        mean_sq = raw[:, 1] ** 2 / total
        spread = mean_sq - (raw[:, 0] / total) ** 2
        redo = (spread < 1e-4 * mean_sq) & (mean_sq > 0) & np.isfinite(mean_sq)
    for i in np.flatnonzero(redo):
        exact = ts[i].to(torch.float64)
        scale = total[i] / n[i]
        raw[i, 0], raw[i, 1] = exact.sum().item() * scale, exact.norm().item() * scale ** 0.5


def finish(raw: np.ndarray, numel: np.ndarray) -> dict[str, np.ndarray]:
    """Raw aggregates to the trace's tensor-stat columns (host side)."""
    s, l2, l1, nonzero, mx, negmin, nan, inf = (raw[:, i] for i in range(len(RAW)))
    n = numel.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = s / n
        var = (l2 * l2 - s * s / n) / (n - 1)
        std = np.sqrt(np.clip(var, 0.0, None))
        std = np.where(np.isnan(var), np.nan, std)
    return {"numel": numel.astype(np.int64), "mean": mean, "std": std, "min": -negmin,
            "max": mx, "abs_mean": l1 / n, "norm": l2, "zero_frac": 1.0 - nonzero / n,
            "nan_count": nan.astype(np.int64), "inf_count": inf.astype(np.int64)}


def reference_stats(t: torch.Tensor) -> dict[str, float]:
    """The same statistics in plain torch, one tensor at a time (tests and documentation)."""
    t = t.detach().double()
    return {"numel": t.numel(), "mean": t.mean().item(), "std": t.std().item(),
            "min": t.min().item(), "max": t.max().item(), "abs_mean": t.abs().mean().item(),
            "norm": t.norm().item(), "zero_frac": (t == 0).double().mean().item(),
            "nan_count": int(torch.isnan(t).sum()), "inf_count": int(torch.isinf(t).sum())}


SATURATING = {"Sigmoid": (0.0, 1.0), "Tanh": (-1.0, 1.0), "Hardsigmoid": (0.0, 1.0),
              "Hardtanh": (-1.0, 1.0), "Softsign": (-1.0, 1.0)}


# Outputs larger than this take their moments (mean, std, norm, abs_mean, zero_frac,
# saturated_frac) from a strided subsample of about this many elements; min, max, dead_frac and
# the NaN/Inf counts always cover every element. Activation maps are the recorder's largest
# inputs, and these estimates are what rules need of them.
ACTIVATION_SUBSAMPLE = 1 << 16


def activation_stats(out: torch.Tensor, module_type: str) -> torch.Tensor:
    """RAW aggregates, then dead_frac and saturated_frac, of one module output, on its device.

    A unit is a channel (dim 1) for 4-D/5-D outputs, else the last dimension. It is dead when
    its output is <= 0 for every sample and position in the batch.
    """
    x = out.detach()
    if x.dim() >= 4:
        dims = [d for d in range(x.dim()) if d != 1]
        peak, trough = x.amax(dim=dims), x.amin(dim=dims)
    else:
        units = x.reshape(-1, x.shape[-1] if x.dim() else 1)
        peak, trough = units.amax(dim=0), units.amin(dim=0)
    flat = x.reshape(-1)
    n = flat.numel()
    sub = flat[::max(1, n // ACTIVATION_SUBSAMPLE)].contiguous()  # strided kernels are slow
    bounds = SATURATING.get(module_type)
    if x.device.type == "cpu":
        sub = sub.float() if sub.dtype in _HALF else sub
        return torch.from_numpy(_activation_stats_cpu(flat, sub, peak, trough, bounds))
    f64 = torch.float64
    scale = n / sub.numel()
    sums = torch.stack([sub.sum(dtype=f64) * scale,
                        torch.linalg.vector_norm(sub, dtype=f64) * scale ** 0.5])
    raw = torch.cat([sums, torch.stack([
        sub.abs().sum().to(f64) * scale, torch.count_nonzero(sub).to(f64) * scale,
        peak.max().to(f64), -trough.min().to(f64)]), _nonfinite(flat, peak, trough)])
    dead = 1.0 - (peak > 0).to(f64).mean()
    if bounds is None:
        saturated = torch.full_like(dead, math.nan)
    else:
        lo, hi = bounds
        saturated = ((sub <= lo + 0.01) | (sub >= hi - 0.01)).to(f64).mean()
    return torch.cat([raw, torch.stack([dead, saturated])])


def _activation_stats_cpu(flat: torch.Tensor, sub: torch.Tensor, peak: torch.Tensor,
                          trough: torch.Tensor, bounds: tuple[float, float] | None) -> np.ndarray:
    # The same numbers as the device path, finished as Python floats: on the CPU reading a
    # value is free, and a dozen reductions replace some thirty small tensor ops.
    n, k = flat.numel(), sub.numel()
    scale = n / k
    high, low = float(peak.max()), float(trough.min())
    nan = inf = 0.0
    if not (math.isfinite(high) and math.isfinite(low)):
        nan, inf = float(torch.isnan(flat).sum()), float(torch.isinf(flat).sum())
    saturated = math.nan
    if bounds is not None:
        saturated = float(((sub <= bounds[0] + 0.01) | (sub >= bounds[1] - 0.01)).sum()) / k
    raw = np.array([[float(sub.sum()) * scale, float(torch.linalg.vector_norm(sub)) * scale ** 0.5,
                     float(sub.abs().sum()) * scale, float(torch.count_nonzero(sub)) * scale,
                     high, -low, nan, inf, 1.0 - float((peak > 0).sum()) / peak.numel(),
                     saturated]])
    _exact_spread_cpu(raw, [sub], n_total=[n])
    return raw[0]


def _nonfinite(flat: torch.Tensor, peak: torch.Tensor, trough: torch.Tensor) -> torch.Tensor:
    # amax/amin propagate NaN and reach ±Inf: finite extremes mean nothing to count.
    if flat.device.type == "cpu" and bool(torch.isfinite(peak).all() & torch.isfinite(trough).all()):
        return torch.zeros(2, dtype=torch.float64)
    return torch.stack([torch.isnan(flat).sum(), torch.isinf(flat).sum()]).to(torch.float64)
