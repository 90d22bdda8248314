"""Tensor statistics computed on the tensors' own device with torch's fused ops, no host sync.

`raw_stats` is the one implementation, for the CPU and accelerators alike: a few foreach and
per-tensor reductions (`torch._foreach_norm`, `aminmax`, `count_nonzero`) whose results are
stacked into one tensor, so that a step's statistics travel to the host in a single copy.
`finish()` turns the aggregates into the trace's columns on the host (the writer thread);
`dense_equivalent` gives a sparse grad a strided stand-in with the same statistics.

What differs by device is only what each device does cheaply. On an accelerator the reductions
are memory-bound: they accumulate in float64 for free and never branch on values (that would
sync the host). On the CPU float64 accumulation of float32 data runs 3-5 times slower than the
vectorized float32 kernels while reading a result costs nothing: there sums accumulate in the
tensor's dtype, NaN and Inf are counted only in a tensor whose norm is not finite, and sum and
norm are redone in float64 for the tensors whose std would lose digits to cancellation
(BatchNorm weights near 1).
"""
from __future__ import annotations

import math
import threading

import numpy as np
import torch

from tracelab.core.schema import TENSOR_STATS

_HALF = (torch.float16, torch.bfloat16)
# The integer type of each float type's width, to read its values' bits.
_BITS = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
         torch.float64: torch.int64}
# Columns of the raw aggregate tensor.
RAW = ("sum", "l2", "l1", "nonzero", "max", "negmin", "nan", "inf")


def raw_stats(tensors: list[torch.Tensor]) -> torch.Tensor:
    """[len(tensors), len(RAW)] float64 aggregates, on the tensors' device. A complex
    tensor's are those of its values' magnitudes (a cast to a real type would keep only the
    real part)."""
    ts = [t.detach() for t in tensors]
    ts = [t.abs() if t.is_complex() else t if t.is_floating_point() else t.double() for t in ts]
    cpu = ts[0].device.type == "cpu"
    if cpu:  # CPU reductions of half types return half results, which overflow at 65504
        ts = [t.float() if t.dtype in _HALF else t for t in ts]
    acc = None if cpu else torch.float64
    # An empty tensor (a rank's empty shard) has no extremes: NaN. Sizes are host metadata,
    # so asking costs no sync.
    extremes = [torch.aminmax(t if t.numel() else t.new_full((1,), math.nan)) for t in ts]
    f64 = torch.float64
    l1, nonzero = _absolute_sums(ts, acc)
    cols = [torch.stack([t.sum(dtype=acc) for t in ts]),
            torch.stack(torch._foreach_norm(ts, 2, dtype=acc)), l1, nonzero,
            torch.stack([m.max for m in extremes]), torch.stack([m.min for m in extremes]).neg()]
    if cpu:
        raw = torch.stack([c.to(f64) for c in cols] + [torch.zeros(len(ts), dtype=f64)] * 2,
                          dim=1).numpy()
        for i in np.flatnonzero(~np.isfinite(raw[:, :3]).all(axis=1)):
            raw[i, 6], raw[i, 7] = torch.isnan(ts[i]).sum(), torch.isinf(ts[i]).sum()
        _exact_spread_cpu(raw, ts)
        return torch.from_numpy(raw)
    cols += [torch.stack([torch.isnan(t).sum() for t in ts]),
             torch.stack([torch.isinf(t).sum() for t in ts])]
    return torch.stack([c.to(f64) for c in cols], dim=1)


def _absolute_sums(ts: list[torch.Tensor], acc: torch.dtype | None
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """(L1 norm, non-zero count) of each tensor, as two stacked tensors.

    abs then sum: twice as fast as the foreach L1 norm on the CPU. A large tensor's absolute
    values go into one scratch buffer, reused from tensor to tensor (pieces of at most _PIECE
    elements): a fresh copy of every large tensor at once cost the CPU more than all the
    reductions together, in page faults on the new memory. The small ones (most of a model's
    tensors, a small part of its values) take one `_foreach_abs`, a call instead of one each.
    The non-zeros are counted on the absolute values' bits as integers (abs clears the sign
    bit, NaN's too: +0.0 and -0.0 both become 0): a float count_nonzero branches on every
    value, 2-3 times slower where zeros are scattered."""
    small = [i for i, t in enumerate(ts) if t.numel() <= _SMALL]
    absolute: list[torch.Tensor | None] = [None] * len(ts)
    for i, a in zip(small, torch._foreach_abs([ts[i] for i in small]) if small else []):
        absolute[i] = a
    l1, nonzero = [], []
    for t, a in zip(ts, absolute):
        if a is not None:
            l1.append(a.sum(dtype=acc))
            nonzero.append(_nonzero(a))
            continue
        pieces = [t] if t.numel() <= _PIECE else list(t.reshape(-1).split(_PIECE))
        sums, counts = [], []
        for piece in pieces:
            scratch = _scratch(piece)
            torch.abs(piece, out=scratch)
            sums.append(scratch.sum(dtype=acc))
            counts.append(_nonzero(scratch))
        l1.append(sums[0] if len(sums) == 1 else torch.stack(sums).sum())
        nonzero.append(counts[0] if len(counts) == 1 else torch.stack(counts).sum())
    return torch.stack(l1), torch.stack(nonzero)


def _nonzero(absolute: torch.Tensor) -> torch.Tensor:
    """The non-zero values of a tensor of absolute values, counted on their bits."""
    bits = _BITS.get(absolute.dtype)
    return torch.count_nonzero(absolute if bits is None else absolute.view(bits))


_SMALL = 1 << 15  # elements of a tensor whose absolute values get a copy of their own
_PIECE = 1 << 20  # elements of the scratch buffer: 4 MB of float32
_SCRATCH = threading.local()  # per thread: {dtype: buffer} of CPU tensors


def _scratch(like: torch.Tensor) -> torch.Tensor:
    """An uninitialized buffer of like's shape, dtype and device. On the CPU one buffer per
    dtype and thread is kept from call to call (new memory faults in page by page); an
    accelerator's caching allocator keeps its memory anyway, and a buffer kept there could be
    reused on another stream before an earlier step's reductions had read it."""
    n = like.numel()
    if like.device.type != "cpu":
        return torch.empty(like.shape, dtype=like.dtype, device=like.device)
    kept = getattr(_SCRATCH, "buffers", None)
    if kept is None:
        kept = _SCRATCH.buffers = {}
    buffer = kept.get(like.dtype)
    if buffer is None or buffer.numel() < n:
        buffer = kept[like.dtype] = torch.empty(max(n, 1 << 12), dtype=like.dtype)
    return buffer[:n].view(like.shape)


def _real(t: torch.Tensor) -> torch.Tensor:
    """A complex tensor as its real and imaginary parts (a view): the same L2 norm, where a
    cast to a real type would keep only the real part."""
    return torch.view_as_real(t) if t.is_complex() else t


def norms(tensors: list[torch.Tensor]) -> torch.Tensor:
    """The L2 norm of each tensor, float64, on their device: one fused reduction. On the CPU,
    a norm whose float32 squares overflowed or underflowed is taken again in float64. A
    complex tensor's norm is that of its values' magnitudes."""
    ts = [_real(t.detach()) for t in tensors]
    ts = [t.float() if t.dtype in _HALF or not t.is_floating_point() else t for t in ts]
    cpu = ts[0].device.type == "cpu"
    found = torch.stack(torch._foreach_norm(ts, 2, dtype=None if cpu else torch.float64))
    found = found.to(torch.float64)
    if cpu:
        values = found.numpy()
        for i in np.flatnonzero(~(values >= 1e-17) | np.isinf(values)):
            values[i] = torch.linalg.vector_norm(ts[i].to(torch.float64))
    return found


def _exact_spread_cpu(raw: np.ndarray, ts: list[torch.Tensor]) -> None:
    """Redo sum, norm and L1 in float64 where std would lose digits to cancellation, where a
    float32 sum overflowed though every value is finite, or where squares underflowed (in
    place). In torch, on a float64 copy: a numpy view of a parameter would make its storage
    one that FSDP can no longer free."""
    n = np.array([max(t.numel(), 1) for t in ts], dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        mean_sq = raw[:, 1] ** 2 / n
        spread = mean_sq - (raw[:, 0] / n) ** 2
        # A float32 sum's error, relative to E[x^2], grows in the variance by E[x^2] / var.
        redo = (spread < 0.5 * mean_sq) & (mean_sq > 0) & np.isfinite(mean_sq)
        overflowed = ~np.isfinite(raw[:, :3]).all(axis=1) & (raw[:, 6] + raw[:, 7] == 0)
        # Squares below float32's normal range (values under 1e-19) lose digits or vanish.
        underflowed = (raw[:, 2] > 0) & (raw[:, 1] < 1e-17)
    for i in np.flatnonzero(redo | overflowed | underflowed):
        exact = ts[i].to(torch.float64)
        raw[i, 0], raw[i, 1] = exact.sum(), torch.linalg.vector_norm(exact)
        raw[i, 2] = exact.abs().sum()


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
    """The same statistics in plain torch, one tensor at a time (tests and documentation); a
    complex tensor's are its magnitudes'.

    Named one by one, not in TENSOR_STATS order: the reference shares nothing with `finish`."""
    t = (t.detach().abs() if t.is_complex() else t.detach()).double()
    return {"numel": t.numel(), "mean": t.mean().item(), "std": t.std().item(),
            "min": t.min().item(), "max": t.max().item(), "abs_mean": t.abs().mean().item(),
            "norm": t.norm().item(), "zero_frac": (t == 0).double().mean().item(),
            "nan_count": int(torch.isnan(t).sum()), "inf_count": int(torch.isinf(t).sum())}
