"""Statistics of module outputs (activations), the recorder's largest inputs.

A module output is read in its forward hook, before a later in-place op can change it. What rules
rely on is exact: the NaN/Inf counts (nonfinite-values), the sum (so the mean), and the share of
dead units (dead-units). The other moments, the range and saturated_frac are estimated from a
subsample of ACTIVATION_SUBSAMPLE elements in short contiguous blocks at fixed pseudo-random
offsets. Outputs no larger than the subsample are covered whole, so every statistic is exact.

On the CPU the hook takes one full torch sum of the output (the exact mean; NaN and Inf show
up in it, and are counted only then), the units' test in numpy and a copy of the subsample,
whose moments the writer thread takes in numpy: reading a value costs nothing there, and a
numpy call on a view costs a few microseconds where a small torch op in a forward hook costs
tens. On an accelerator every statistic is a device reduction (min and max cover every
element there), with no host sync.
"""
from __future__ import annotations

import functools
import math
from typing import Sequence, Union

import numpy as np
import torch

from tracelab.recorders.stats import RAW, finish
from tracelab.recorders.transfer import StepRecord
from tracelab.core.schema import ACTIVATION, ACTIVATION_STATS, TENSORS

_HALF = (torch.float16, torch.bfloat16)
SATURATING = {"Sigmoid": (0.0, 1.0), "Tanh": (-1.0, 1.0), "Hardsigmoid": (0.0, 1.0),
              "Hardtanh": (-1.0, 1.0), "Softsign": (-1.0, 1.0)}

ACTIVATION_SUBSAMPLE = 1 << 14
# Contiguous runs make the gather cheap (a cache miss per run, then prefetched lines); 256 of
# them at random offsets keep the sample spread over samples, channels and positions (evenly
# spaced offsets could alias with the channel period and see one channel only).
_BLOCK = 64

ActivationStats = Union[torch.Tensor, np.ndarray, "Sampled"]


def activation_stats(out: torch.Tensor, module_type: str) -> ActivationStats:
    """RAW aggregates followed by schema.ACTIVATION_STATS of one module output.

    A device tensor on accelerators (packed and copied with the step's other statistics); on
    the CPU a `Sampled`, whose row the writer thread finishes. A unit is a channel (dim 1) for
    4-D/5-D outputs, else the last dimension; it is dead when its output is <= 0 for every
    sample and position in the batch.
    """
    x = out.detach()
    if x.dtype in _HALF and x.is_cpu:
        x = x.float()  # CPU reductions of half types return half results, which overflow
    bounds = SATURATING.get(module_type)
    if x.is_cpu:
        return _cpu_stats(x, bounds)
    return _device_stats(x, bounds)


def record_activations(step: int, captured: Sequence[tuple[str, int, ActivationStats]],
                       record: StepRecord, split: str | None = None) -> None:
    """Add the rows of a step's captured (module name, numel, activation_stats) to `record`:
    device statistics join the step's packed copy; CPU ones are finished with the rows, on
    the writer thread (Sampled.row). `split`: the evaluation they were read in (None: the
    training pass, rows without a split)."""
    names = [a[0] for a in captured]
    numel = np.array([a[1] for a in captured], dtype=np.int64)
    on_device = [i for i, a in enumerate(captured) if isinstance(a[2], torch.Tensor)]
    packed: tuple[torch.Tensor, ...] = ()
    if on_device:
        device = captured[on_device[0]][2].device
        packed = (torch.stack([captured[i][2].to(device) for i in on_device]),)

    def rows(values: list[np.ndarray]) -> list[tuple[str, dict]]:
        raw = np.empty((len(captured), len(RAW) + len(ACTIVATION_STATS)))
        if on_device:
            raw[on_device] = values[0].reshape(len(on_device), -1)
        for i, a in enumerate(captured):
            if isinstance(a[2], Sampled):  # read in the hook on the CPU, reduced here
                raw[i] = a[2].row()
            elif isinstance(a[2], np.ndarray):  # a finished row
                raw[i] = a[2]
        modules, total, pooled = pool_calls(names, numel, raw)
        cols = finish(pooled[:, :len(RAW)], total)
        cols.update(zip(ACTIVATION_STATS, pooled[:, len(RAW):].T))
        cols.update(step=np.full(len(modules), step, dtype=np.int64),
                    kind=[ACTIVATION] * len(modules), name=modules)
        if split is not None:
            cols["split"] = [split] * len(modules)
        return [(TENSORS, cols)]
    record.add(rows, packed)


# How each RAW + ACTIVATION_STATS column pools over a module's calls: sums add, the norm adds
# its squares, the extremes keep the largest (max and -min).
_ADD, _NORM, _MAX = (0, 2, 3, 6, 7), (1,), (4, 5)
_DEAD, _SATURATED = len(RAW), len(RAW) + 1


def pool_calls(names: Sequence[str], numel: np.ndarray,
               raw: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray]:
    """One row per module from one row per call (a module called k times in the forward pass):
    its statistics over all the elements of its calls. A unit is dead when it is in every call,
    so the pooled dead_frac is the least of the calls' (an upper bound of the exact one); the
    saturated share is the calls' mean weighted by their sizes. The rows are in the order of
    the modules' last calls: the module that ran last (the model's output) stays last."""
    last = {name: i for i, name in enumerate(names)}
    if len(last) == len(names):
        return list(names), numel, raw
    modules = sorted(last, key=last.__getitem__)
    index = {m: i for i, m in enumerate(modules)}
    rows = np.array([index[n] for n in names])
    out = np.empty((len(modules), raw.shape[1]))
    total = np.zeros(len(modules), dtype=np.int64)
    np.add.at(total, rows, numel)
    for i in range(len(modules)):
        calls, sizes = raw[rows == i], numel[rows == i].astype(np.float64)
        out[i, _ADD] = calls[:, _ADD].sum(axis=0)
        out[i, _NORM] = np.sqrt(np.square(calls[:, _NORM]).sum(axis=0))
        out[i, _MAX] = calls[:, _MAX].max(axis=0)
        out[i, _DEAD] = calls[:, _DEAD].min()
        out[i, _SATURATED] = (calls[:, _SATURATED] * sizes).sum() / sizes.sum()
    return modules, total, out


def activation_row(out: torch.Tensor, module_type: str) -> np.ndarray:
    """The finished row (RAW + ACTIVATION_STATS) as float64, whatever the device (tests,
    documentation)."""
    stats = activation_stats(out, module_type)
    if isinstance(stats, Sampled):
        return stats.row()
    return stats.double().cpu().numpy() if isinstance(stats, torch.Tensor) else stats


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
    if device.type == "cpu":
        return torch.from_numpy(_cpu_blocks(n_blocks))
    # Drawn on the device itself: a host-to-device copy would make the training thread wait.
    generator = torch.Generator(device=device).manual_seed(n_blocks)
    k = ACTIVATION_SUBSAMPLE // _BLOCK
    return torch.randperm(n_blocks, generator=generator, device=device)[:k].sort().values


@functools.lru_cache(maxsize=512)
def _cpu_blocks(n_blocks: int) -> np.ndarray:
    rng = np.random.default_rng(n_blocks)
    return np.sort(rng.choice(n_blocks, ACTIVATION_SUBSAMPLE // _BLOCK, replace=False))


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
    """How many units are never > 0 in the batch, exactly (CPU tensors).

    A unit seen positive in a trailing slice of the batch is alive, and only the others are
    read in full. NaN is not > 0 and never hides a positive value of the same unit.
    """
    return _dead_units_tail(x.detach())


def _cpu_stats(x: torch.Tensor, bounds: tuple[float, float] | None) -> "Sampled":
    """What the hook reads of a CPU output: one full torch sum (exact mean, and NaN/Inf show
    up in it), the units' test (on a trailing slice, right after the sum: the tail it read
    last is in cache), and a copy of the subsample (of the whole output when no larger), whose
    moments the writer thread takes (Sampled.row). Few calls: in a forward hook, between
    layers that stream megabytes through the cache, each call costs tens of microseconds."""
    lo, hi = (bounds[0] + 0.01, bounds[1] - 0.01) if bounds else (-math.inf, math.inf)
    n = x.numel()
    n_units = x.shape[1] if x.dim() >= 4 else x.shape[-1] if x.dim() else 1
    if n > ACTIVATION_SUBSAMPLE:
        total, nan, inf = _torch_sum(x)
        dead = _dead_units_tail(x)
        return Sampled(_sample_values(x), n, total, nan, inf, dead / max(n_units, 1), lo, hi)
    v = _sample_values(x)
    dead = _dead_units_whole(v, x)
    # A copy: a view of the output would see what a later in-place op writes into it.
    return Sampled(v.copy(), n, None, 0.0, 0.0, dead / max(n_units, 1), lo, hi)


def _torch_sum(x: torch.Tensor) -> tuple[float, float, float]:
    """(sum, NaN count, Inf count) of x in one full torch sum: NaN and Inf show up in it, and
    are counted only then; the sum is taken again in float64 if finite values overflowed."""
    total = float(x.sum())
    if math.isfinite(total):
        return total, 0.0, 0.0
    nan, inf = float(torch.isnan(x).sum()), float(torch.isinf(x).sum())
    if not (nan or inf):
        total = float(x.sum(dtype=torch.float64))
    return total, nan, inf


class Sampled:
    """A CPU output as its hook read it: the exact parts (sum, NaN and Inf counts, dead share;
    `total` None when `values` is the whole output, which then gives them) and its subsample's
    values, a copy. `row()` (the writer thread) reduces the subsample: the extremes and the
    non-zeros in the values' own type (exact), the moments in float64, and a sample of one
    sign has its L1 sum from its sum (the same values, summed in the same order)."""

    __slots__ = ("values", "n", "total", "nan", "inf", "dead", "lo", "hi")

    def __init__(self, values: np.ndarray, n: int, total: float | None, nan: float, inf: float,
                 dead: float, lo: float, hi: float):
        self.values, self.n, self.total, self.nan, self.inf = values, n, total, nan, inf
        self.dead, self.lo, self.hi = dead, lo, hi

    def row(self) -> np.ndarray:
        """The finished float64 row: RAW followed by ACTIVATION_STATS."""
        v, n, lo, hi = self.values, self.n, self.lo, self.hi
        whole = self.total is None
        total, nan, inf = (0.0, 0.0, 0.0) if whole else (self.total, self.nan, self.inf)
        s = v if v.dtype == np.float64 else v.astype(np.float64)
        k = len(s)
        with np.errstate(invalid="ignore", over="ignore"):
            part = float(s.sum())
            if whole:  # the whole output
                total = part
                if not math.isfinite(total):
                    nan, inf = float(np.isnan(s).sum()), float(np.isinf(s).sum())
            # NaN propagates into the extremes (and the moments): one test instead of a pass.
            top, bottom = float(v.max()), float(v.min())
            if math.isnan(top) or math.isnan(bottom):
                top = bottom = math.nan
            # Not `@`: a BLAS dot of this size wakes BLAS's threads, which then fight torch's.
            centred = s - part / k
            var = float(np.square(centred, out=centred).sum()) / (k - 1) if k > 1 else 0.0
            square = var * (k - 1) + part * part / k if whole else \
                var * (n - 1) + total * total / n
            # All of one sign (a ReLU's, a pool's after it): |s| is s or -s, its sum |part|.
            magnitude = abs(part) if bottom >= 0 or top <= 0 else \
                float(np.abs(s, out=centred).sum())
        saturated = np.count_nonzero((s <= lo) | (s >= hi)) / k if math.isfinite(lo) \
            else math.nan
        # `!= 0` then a count of bools: a float count_nonzero branches on every value.
        return np.array([total,
                         math.sqrt(max(square, 0.0)) if math.isfinite(square) else math.nan,
                         magnitude * n / k, np.count_nonzero(v != 0) * n / k, top, -bottom,
                         nan, inf, self.dead, saturated])


def _sample_values(x: torch.Tensor) -> np.ndarray:
    """subsample(_flat_view(x)) as numpy values, gathered in numpy (one call where torch's
    index_select and its tensor cost several times more in a hook). An output read whole is
    a view of it (only read). numpy reads neither a subclass (DTensor) nor a lazily negated
    view: those go through torch."""
    flat = _flat_view(x)
    if type(flat) is not torch.Tensor or flat.is_neg():
        return subsample(flat).numpy()
    values = flat.numpy()
    n = len(values)
    if n <= ACTIVATION_SUBSAMPLE:
        return values
    blocks = values[:n - n % _BLOCK].reshape(-1, _BLOCK)
    return np.take(blocks, _cpu_blocks(n // _BLOCK), axis=0).reshape(-1)


def _dead_units_whole(s: np.ndarray, x: torch.Tensor) -> int:
    """dead_units of a contiguous output read whole into `s` (its values in memory order), in
    numpy; a strided one in torch."""
    if not x.is_contiguous():
        return _dead_units_tail(x)
    if x.dim() >= 4:
        units = s.reshape(x.shape[0], x.shape[1], -1)
        return int((~(units > 0).any(axis=(0, 2))).sum())
    width = x.shape[-1] if x.dim() else 1
    return int((~(s.reshape(-1, width) > 0).any(axis=0)).sum())


def _dead_units_tail(x: torch.Tensor) -> int:
    """dead_units: a unit seen positive in a trailing slice of the batch is alive, and only the
    others are read in the rest of the batch (in numpy on the CPU: a view, and a few calls
    where torch's would cost tens of microseconds each). The trailing samples are the last
    the layer wrote and the full sum read: still in cache, where a leading slice was read
    again from memory."""
    t, dims = _units(x)
    per_sample = max(1, math.prod(t.shape[1:]))
    tail = min(t.shape[0], max(1, -(-ACTIVATION_SUBSAMPLE // per_sample)))
    rest = t.shape[0] - tail
    # numpy reads neither a subclass (DTensor) nor a lazily negated view.
    if t.is_cpu and type(t) is torch.Tensor and not t.is_neg():
        values, axes = t.numpy(), tuple(dims)
        alive = (values[rest:] > 0).any(axis=axes)
        if alive.all():  # the usual case: one call more, none to list the candidates
            return 0
        candidates = np.flatnonzero(~alive)
        return int((~(values[:rest, candidates] > 0).any(axis=axes)).sum())
    candidates = torch.nonzero(~_any_positive(t[rest:], dims)).flatten()
    if not len(candidates):
        return 0
    return int((~_any_positive(t.index_select(1, candidates), dims)).sum())


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

