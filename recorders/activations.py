"""Statistics of module outputs (activations), the recorder's largest inputs.

A module output is read in its forward hook, before a later in-place op can change it. What rules
rely on is exact: the NaN/Inf counts (nonfinite-values), the sum (so the mean), and the share of
dead units (dead-units). The other moments, the range and saturated_frac are estimated from a
subsample of ACTIVATION_SUBSAMPLE elements in short contiguous blocks at fixed pseudo-random
offsets. Outputs no larger than the subsample are covered whole, so every statistic is exact.

On the CPU the hook does three cheap things: one full `sum`, the dead-unit test (a small leading
slice of the batch, then only the units that slice could not prove alive), and the block copy;
the subsample is finished in numpy on the writer thread. On an accelerator every statistic is a
device reduction (min and max cover every element there), with no host sync.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple, Union

import numpy as np
import torch

_HALF = (torch.float16, torch.bfloat16)
SATURATING = {"Sigmoid": (0.0, 1.0), "Tanh": (-1.0, 1.0), "Hardsigmoid": (0.0, 1.0),
              "Hardtanh": (-1.0, 1.0), "Softsign": (-1.0, 1.0)}
# An activation row is stats.RAW followed by these.
EXTRA = ("dead_frac", "saturated_frac")

ACTIVATION_SUBSAMPLE = 1 << 14
# Contiguous runs make the copy cheap; 1,024 of them at random offsets keep the sample spread
# over samples, channels and positions (evenly spaced offsets could alias with the channel
# period and see one channel only).
_BLOCK = 16
# The dead-unit test first reads about this many leading elements per unit layout.
_LEAD = 1 << 14

ActivationStats = Union[torch.Tensor, "CpuActivation"]


def activation_stats(out: torch.Tensor, module_type: str) -> ActivationStats:
    """RAW aggregates plus EXTRA of one module output.

    A device tensor on accelerators (packed and copied with the step's other statistics); on
    the CPU a CpuActivation, which `finish_cpu` turns into rows on the writer thread. A unit
    is a channel (dim 1) for 4-D/5-D outputs, else the last dimension; it is dead when its
    output is <= 0 for every sample and position in the batch.
    """
    x = out.detach()
    if x.dtype in _HALF and x.device.type == "cpu":
        x = x.float()  # CPU reductions of half types return half results, which overflow
    bounds = SATURATING.get(module_type)
    if x.device.type == "cpu":
        return _cpu_stats(x, bounds)
    return _device_stats(x, bounds)


def activation_row(out: torch.Tensor, module_type: str) -> np.ndarray:
    """The finished row (RAW + EXTRA) as float64, whatever the device (tests, documentation)."""
    stats = activation_stats(out, module_type)
    if isinstance(stats, torch.Tensor):
        return stats.double().cpu().numpy()
    return finish_cpu([stats])[0]


def subsample(flat: torch.Tensor) -> torch.Tensor:
    """A copy of ACTIVATION_SUBSAMPLE elements of a 1-D tensor, or of all of them if fewer."""
    n = flat.numel()
    if n <= ACTIVATION_SUBSAMPLE:
        return flat.clone()
    # Few calls: in a training loop each small op costs tens of microseconds.
    blocks = (flat if n % _BLOCK == 0 else flat[:n - n % _BLOCK]).view(-1, _BLOCK)
    return blocks.index_select(0, _block_index(n // _BLOCK, flat.device)).view(-1)


@functools.lru_cache(maxsize=512)
def _block_index(n_blocks: int, device: torch.device) -> torch.Tensor:
    # Seeded by the size: the same positions every step, so the series stay comparable.
    k = ACTIVATION_SUBSAMPLE // _BLOCK
    if device.type == "cpu":
        rng = np.random.default_rng(n_blocks)
        return torch.from_numpy(np.sort(rng.choice(n_blocks, k, replace=False)))
    # Drawn on the device itself: a host-to-device copy would make the training thread wait.
    generator = torch.Generator(device=device).manual_seed(n_blocks)
    return torch.randperm(n_blocks, generator=generator, device=device)[:k].sort().values


def _flat_view(x: torch.Tensor) -> torch.Tensor:
    """x's elements in memory order as a 1-D view; a copy only for non-dense layouts."""
    if not x.is_contiguous():
        y = x.permute(sorted(range(x.dim()), key=lambda d: (-x.stride(d), -x.shape[d])))
        if y.is_contiguous():  # channels_last, transposes
            return y.reshape(-1)
    return x.reshape(-1)


def _units(x: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
    """(tensor with the units on dim 1, the other dims): channels for 4-D/5-D outputs, else the
    last dimension."""
    if x.dim() >= 4:
        return x, [d for d in range(x.dim()) if d != 1]
    return x.reshape(-1, x.shape[-1] if x.dim() else 1), [0]


def dead_units(x: torch.Tensor) -> int:
    """How many units are never > 0 in the batch, exactly, reading little of x.

    A unit seen positive in a leading slice of the batch is alive; only the others are read
    in full: almost none in a healthy network, the dead units in a dying one. NaN is not > 0,
    and never hides a positive value of the same unit.
    """
    t, dims = _units(x)
    per_sample = max(1, math.prod(t.shape[1:]))
    lead = min(t.shape[0], max(1, -(-_LEAD // per_sample)))
    peaks = t[:lead].amax(dim=dims)
    if float(peaks.min()) > 0:  # NaN is not: its unit is read in full below
        return 0
    candidates = torch.nonzero(~(peaks > 0)).flatten()
    whole = torch.nan_to_num_(t.index_select(1, candidates), nan=0.0)  # a copy
    return len(candidates) - int((whole.amax(dim=dims) > 0).sum())


class CpuActivation(NamedTuple):
    """What the hook keeps of a CPU module output: exact counts and a private subsample."""
    sub: np.ndarray
    numel: int
    total: float
    nan: float
    inf: float
    dead: float
    bounds: tuple[float, float] | None


def _cpu_stats(x: torch.Tensor, bounds: tuple[float, float] | None) -> CpuActivation:
    n = x.numel()
    total = float(x.sum())  # the one full pass: exact mean, and NaN/Inf show up in it
    nan = inf = 0.0
    if not math.isfinite(total):
        nan, inf = float(torch.isnan(x).sum()), float(torch.isinf(x).sum())
        if not (nan or inf):  # finite values overflowed float32
            total = float(x.sum(dtype=torch.float64))
    n_units = x.shape[1] if x.dim() >= 4 else (x.shape[-1] if x.dim() else 1)
    dead = dead_units(x) / n_units
    return CpuActivation(subsample(_flat_view(x)).numpy(), n, total, nan, inf, dead, bounds)


def finish_cpu(items: list[CpuActivation]) -> np.ndarray:
    """[len(items), RAW + EXTRA] rows (writer thread).

    One item at a time in the subsample's own float32: every temporary stays small enough for
    the allocator to reuse, where one stacked float64 matrix costs fresh pages every step.
    """
    return np.array([_finish_one(item) for item in items], dtype=np.float64).reshape(-1, 10)


def _finish_one(a: CpuActivation) -> list[float]:
    s, n, total = a.sub, a.numel, a.total
    k = len(s)
    if k == n and not (a.nan or a.inf):
        total = float(s.sum(dtype=np.float64))  # the whole output: keep every digit
    with np.errstate(invalid="ignore", over="ignore"):
        saturated = math.nan
        if a.bounds is not None:
            lo, hi = a.bounds
            saturated = np.count_nonzero((s <= lo + 0.01) | (s >= hi - 0.01)) / k
        high, low, nonzero = float(s.max()), float(s.min()), np.count_nonzero(s)
        l1 = float(np.abs(s).sum())
        centered = s - s.mean()
        var = float(np.square(centered, out=centered).sum()) / (k - 1) if k > 1 else 0.0
    # The norm that, with the exact sum, gives the subsample's variance in finish().
    l2 = math.sqrt(max(var * (n - 1) + total * total / n, 0.0)) if math.isfinite(var) \
        and math.isfinite(total) else math.nan
    scale = n / k
    return [total, l2, l1 * scale, nonzero * scale, high, -low, a.nan, a.inf, a.dead, saturated]


def _any_positive(t: torch.Tensor, dims: list[int]) -> torch.Tensor:
    # amax would let one NaN hide a unit's positive values.
    return (t > 0).to(torch.uint8).amax(dim=dims) > 0


def _device_stats(x: torch.Tensor, bounds: tuple[float, float] | None) -> torch.Tensor:
    # Reductions are memory-bound on accelerators: read everything, accumulate in float64, and
    # never branch on values (that would sync the host).
    t, dims = _units(x)
    peak, trough = t.amax(), t.amin()
    flat = _flat_view(x)
    sub = subsample(flat)
    f64 = torch.float64
    n, k = flat.numel(), sub.numel()
    scale = n / k
    total = flat.sum(dtype=f64)
    mean = sub.to(f64).mean()
    var = (sub.to(f64) - mean).square().sum() / max(k - 1, 1)
    raw = torch.stack([
        total, (var * (n - 1) + total * total / n).clamp(min=0).sqrt(),
        sub.abs().sum(dtype=f64) * scale, torch.count_nonzero(sub).to(f64) * scale,
        peak.to(f64), -trough.to(f64),
        torch.isnan(flat).sum().to(f64), torch.isinf(flat).sum().to(f64),
        1.0 - _any_positive(t, dims).to(f64).mean()])
    if bounds is None:
        saturated = torch.full_like(total, math.nan)
    else:
        lo, hi = bounds
        saturated = ((sub <= lo + 0.01) | (sub >= hi - 0.01)).to(f64).mean()
    return torch.cat([raw, saturated.reshape(1)])

