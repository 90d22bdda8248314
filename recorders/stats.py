"""Tensor statistics computed on the tensors' own device with few fused ops and no host sync.

The device side returns raw aggregates per tensor, stacked into one tensor so that a step's
statistics travel to the host in a single copy. `finish()` turns them into the trace's columns on
the host (the writer thread). Aggregates accumulate in float64, so std stays exact for tensors
whose mean dwarfs their spread (BatchNorm weights near 1).
"""
from __future__ import annotations

import math

import numpy as np
import torch

# Columns of the raw aggregate tensor.
RAW = ("sum", "l2", "l1", "nonzero", "max", "negmin", "nan", "inf")


def raw_stats(tensors: list[torch.Tensor]) -> torch.Tensor:
    """[len(tensors), len(RAW)] float64 aggregates, on the tensors' device."""
    ts = [t.detach() for t in tensors]
    ts = [t if t.is_floating_point() else t.double() for t in ts]
    f64 = torch.float64
    l2 = torch._foreach_norm(ts, 2, dtype=f64)
    l1 = torch._foreach_norm(ts, 1, dtype=f64)
    nonzero = torch._foreach_norm(ts, 0, dtype=f64)
    mx = torch._foreach_max(ts)
    negmin = torch._foreach_max(torch._foreach_neg(ts))
    sums = [t.sum(dtype=f64) for t in ts]
    cols = [torch.stack(sums), torch.stack(l2), torch.stack(l1), torch.stack(nonzero),
            torch.stack(mx).to(f64), torch.stack(negmin).to(f64)]
    counts = _nonfinite_counts(ts, cols[1])
    return torch.stack(cols + counts, dim=1)


def _nonfinite_counts(ts: list[torch.Tensor], l2: torch.Tensor) -> list[torch.Tensor]:
    zeros = torch.zeros_like(l2)
    if l2.device.type == "cpu":
        # On the CPU, reading the norms costs nothing: count only where a norm is not finite.
        bad = (~torch.isfinite(l2)).nonzero().flatten().tolist()
        if not bad:
            return [zeros, zeros]
        nan, inf = zeros.clone(), zeros.clone()
        for i in bad:
            nan[i] = torch.isnan(ts[i]).sum()
            inf[i] = torch.isinf(ts[i]).sum()
        return [nan, inf]
    # On an accelerator, branching on the norms would sync the host: always count.
    return [torch.stack([torch.isnan(t).sum() for t in ts]).to(l2.dtype),
            torch.stack([torch.isinf(t).sum() for t in ts]).to(l2.dtype)]


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


def activation_extra(out: torch.Tensor, module_type: str) -> torch.Tensor:
    """[dead_frac, saturated_frac] of one module output, on its device.

    A unit is a channel (dim 1) for 4-D/5-D outputs, else the last dimension. It is dead when
    its output is <= 0 for every sample and position in the batch.
    """
    x = out.detach()
    if x.dim() >= 4:
        alive = (x > 0).transpose(0, 1).reshape(x.shape[1], -1).any(dim=1)
    elif x.dim() >= 1:
        alive = (x > 0).reshape(-1, x.shape[-1]).any(dim=0)
    else:
        alive = (x > 0).reshape(1)
    dead = 1.0 - alive.double().mean()
    bounds = SATURATING.get(module_type)
    if bounds is None:
        saturated = torch.full_like(dead, math.nan)
    else:
        lo, hi = bounds
        margin = 0.01 * (hi - lo) / 2 if lo < 0 else 0.01
        saturated = ((x <= lo + margin) | (x >= hi - margin)).double().mean()
    return torch.stack([dead, saturated])
