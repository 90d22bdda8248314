"""Compiled one-pass statistics for the CPU recorder (numba).

On the CPU every statistic of a tensor is a pass over its memory, and inside a training loop
each small torch call costs tens of microseconds. These kernels read each value once and keep
every aggregate of the trace's tensor row at the same time, in float64, with the loop split into
lanes the compiler vectorizes. One call covers all of a model's weights, grads and updates: the
tensors are passed as (address, size) rows, so that no copy is made and no call is spent per
tensor. They release the GIL.

The aggregates are stats.RAW: sum, l2 (the norm), l1, nonzero, max, negmin, nan, inf. A NaN
makes max and min NaN (as in torch and numpy); NaN counts as nonzero.
"""
from __future__ import annotations

import numpy as np

try:
    import numba
except ImportError as exc:  # recorders.kernel_loader then falls back to torch
    raise ImportError("numba is not installed (pip install 'tracelab[torch]')") from exc
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

# Reassociation lets the compiler split each sum into vector lanes; NaN and Inf keep their IEEE
# meaning (no nnan/ninf), because they are what the rules look for.
_FAST = {"reassoc", "nsz", "contract"}
_L = 16  # lanes: two AVX-512 float64 registers per aggregate
_CHUNK = 1 << 14  # differences are formed this many at a time, in the L2 cache


def _jit(fn):
    """njit, cached on disk where the package's folder (or numba's cache folder) is writable."""
    try:
        return numba.njit(nogil=True, cache=True, fastmath=_FAST)(fn)
    except RuntimeError:  # no writable cache location: compile in each process instead
        return numba.njit(nogil=True, fastmath=_FAST)(fn)


@intrinsic
def _pointer(typingctx, address):
    """An int64 address as a raw pointer, for numba.carray."""
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)
    return types.voidptr(types.int64), codegen


@numba.njit(inline="always", nogil=True, fastmath=_FAST)
def _add(w, nonzero, k, s1, s2, sa, nz, top, bottom):
    s1[k] += w
    s2[k] += w * w
    sa[k] += abs(w)
    nz[k] += nonzero
    top[k] = w if w > top[k] else top[k]
    bottom[k] = w if w < bottom[k] else bottom[k]


@_jit
def _moments(x):
    """(sum, sum of squares, sum of |v|, nonzero, max, min) of the values v of x.

    NaN is skipped by max and min here; callers look for NaN when the sum is not finite.
    """
    s1, s2, sa, top, bottom = np.zeros(_L), np.zeros(_L), np.zeros(_L), np.zeros(_L), np.zeros(_L)
    nz = np.zeros(_L, np.int64)
    top[:], bottom[:] = -np.inf, np.inf
    full = x.shape[0] // _L * _L
    for j in range(0, full, _L):
        for k in range(_L):
            _add(np.float64(x[j + k]), x[j + k] != 0, k, s1, s2, sa, nz, top, bottom)
    for j in range(full, x.shape[0]):
        _add(np.float64(x[j]), x[j] != 0, j - full, s1, s2, sa, nz, top, bottom)
    return s1.sum(), s2.sum(), sa.sum(), nz.sum(), top.max(), bottom.min()


@_jit
def _moments_banded(x, shift, lo, hi):
    """_moments of w = v - shift over the values v of x (nonzero still counts v != 0), and the
    count of v outside (lo, hi). Slower: kept apart for the outputs and inputs that need it."""
    s1, s2, sa, top, bottom = np.zeros(_L), np.zeros(_L), np.zeros(_L), np.zeros(_L), np.zeros(_L)
    nz, sat = np.zeros(_L, np.int64), np.zeros(_L, np.int64)
    top[:], bottom[:] = -np.inf, np.inf
    full = x.shape[0] // _L * _L
    for j in range(0, full, _L):
        for k in range(_L):
            v = x[j + k]
            _add(np.float64(v) - shift, v != 0, k, s1, s2, sa, nz, top, bottom)
            sat[k] += (v <= lo) | (v >= hi)
    for j in range(full, x.shape[0]):
        v = x[j]
        _add(np.float64(v) - shift, v != 0, j - full, s1, s2, sa, nz, top, bottom)
        sat[j - full] += (v <= lo) | (v >= hi)
    return s1.sum(), s2.sum(), sa.sum(), nz.sum(), top.max(), bottom.min(), sat.sum()


@_jit
def _nonfinite(x):
    """(NaN count, Inf count) of x."""
    nan = 0
    inf = 0
    for i in range(x.shape[0]):
        nan += np.isnan(x[i])
        inf += np.isinf(x[i])
    return nan, inf


@numba.njit(inline="always", nogil=True)
def _store(out, s1, s2, sa, nz, top, bottom, nan, inf, n):
    if nan or n == 0:
        top = bottom = np.nan  # NaN propagates; an empty tensor has no range
    out[0] = s1
    out[1] = np.sqrt(s2)
    out[2] = sa
    out[3] = nz
    out[4] = top
    out[5] = -bottom
    out[6] = nan
    out[7] = inf


@numba.njit(inline="always", nogil=True)
def _ordered(v, shift, mask):
    """The bits v of a float as an integer that orders like the float (for all but NaN):
    integer max and min reductions vectorize where float ones do not."""
    return v ^ ((v >> shift) & mask)


@_jit
def _pass(x, xi, shift, mask):
    """(sum, sum of squares, sum of |v|, nonzero, max, min) of the values v of x, one pass;
    xi is x's memory as integers of its width, for the range. Max and min are meaningless when
    x holds a NaN: callers look for NaN when the sum is not finite."""
    s1 = s2 = sa = nz = 0.0
    top, bottom = ~mask, mask
    for i in range(x.shape[0]):
        w = np.float64(x[i])
        s1 += w
        s2 += w * w
        sa += abs(w)
        nz += w != 0
        k = _ordered(xi[i], shift, mask)
        top = max(top, k)
        bottom = min(bottom, k)
    return s1, s2, sa, nz, top, bottom


@_jit
def _as_float(k, x, xi, shift, mask):
    """The float whose _ordered bits are k (x, xi: arrays of the float and integer types)."""
    bits = np.empty(1, xi.dtype)
    bits[0] = _ordered(k, shift, mask)
    return np.float64(bits.view(x.dtype)[0])


@_jit
def _raw(x, xi, out, shift, mask):
    """out[:8] = stats.RAW of x (xi: its memory as integers)."""
    s1, s2, sa, nz, top, bottom = _pass(x, xi, shift, mask)
    nan = inf = 0
    if not np.isfinite(s1):
        nan, inf = _nonfinite(x)
    _store(out, s1, s2, sa, nz, _as_float(top, x, xi, shift, mask),
           _as_float(bottom, x, xi, shift, mask), nan, inf, x.shape[0])


@_jit
def _raw_with_update(x, xi, old, out, update, scratch, shift, mask):
    """out[:8] = stats.RAW of x, and update[:8] = those of x - old (in x's precision, as torch
    subtracts), in one pass over both: a chunk of x at a time, its difference formed in
    `scratch` (a loop over two arrays would not vectorize)."""
    acc = np.zeros((2, 8))  # per result: sum, squares, abs, nonzero, max, min, nan, inf
    acc[:, 4] = -np.inf
    acc[:, 5] = np.inf
    scratch_i = scratch.view(xi.dtype)
    for at in range(0, x.shape[0], scratch.shape[0]):
        m = min(scratch.shape[0], x.shape[0] - at)
        chunk, chunk_i = x[at:at + m], xi[at:at + m]
        d, d_i = scratch[:m], scratch_i[:m]
        for i in range(m):
            d[i] = chunk[i] - old[at + i]
        for r in range(2):
            part, part_i = (chunk, chunk_i) if r == 0 else (d, d_i)
            c1, c2, ca, cz, ct, cb = _pass(part, part_i, shift, mask)
            if not np.isfinite(c1):
                cn, ci = _nonfinite(part)
                acc[r, 6] += cn
                acc[r, 7] += ci
            acc[r, 0] += c1
            acc[r, 1] += c2
            acc[r, 2] += ca
            acc[r, 3] += cz
            acc[r, 4] = max(acc[r, 4], _as_float(ct, part, part_i, shift, mask))
            acc[r, 5] = min(acc[r, 5], _as_float(cb, part, part_i, shift, mask))
    for r in range(2):
        a = acc[r]
        _store(out if r == 0 else update, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7],
               x.shape[0])


# Per float dtype: an empty array of the integers of its width, the sign shift, the mask.
_ORDER = {np.dtype(np.float32): (np.empty(0, np.int32), np.int32(31), np.int32(0x7FFFFFFF)),
          np.dtype(np.float64): (np.empty(0, np.int64), np.int64(63),
                                 np.int64(0x7FFFFFFFFFFFFFFF))}


def tensor_stats(weights, grads, before, out):
    """stats.RAW of tensors given by (address, size) rows, with no copy.

    out holds a row per tensor of `weights`, then of `grads`, then, when `before` is not empty,
    of each weight's update: the weight minus its earlier value in `before` (the weights
    before the optimizer step, one after another, from `gather`). Every tensor is contiguous
    and of before's dtype (float32 or float64).
    """
    ints, shift, mask = _ORDER[before.dtype]
    _tensor_stats(weights, grads, before, out, ints, shift, mask)


@_jit
def _tensor_stats(weights, grads, before, out, ints, shift, mask):
    scratch = np.empty(_CHUNK, before.dtype)
    at = 0
    for t in range(weights.shape[0]):
        x = numba.carray(_pointer(weights[t, 0]), weights[t, 1], before.dtype)
        xi = numba.carray(_pointer(weights[t, 0]), weights[t, 1], ints.dtype)
        if before.shape[0]:
            update = out[weights.shape[0] + grads.shape[0] + t]
            _raw_with_update(x, xi, before[at:at + x.shape[0]], out[t], update, scratch, shift,
                             mask)
            at += x.shape[0]
        else:
            _raw(x, xi, out[t], shift, mask)
    for t in range(grads.shape[0]):
        x = numba.carray(_pointer(grads[t, 0]), grads[t, 1], before.dtype)
        xi = numba.carray(_pointer(grads[t, 0]), grads[t, 1], ints.dtype)
        _raw(x, xi, out[weights.shape[0] + t], shift, mask)


@_jit
def gather(tensors, out):
    """Copy the contiguous tensors of (address, size) rows `tensors` (of out's dtype) into out,
    one after another."""
    at = 0
    for t in range(tensors.shape[0]):
        out[at:at + tensors[t, 1]] = numba.carray(_pointer(tensors[t, 0]), tensors[t, 1],
                                                  out.dtype)
        at += tensors[t, 1]


@_jit
def dead_units(x3):
    """How many units u have no x3[:, u, :] > 0: a unit's scan stops at its first positive
    value, so a healthy layer costs a few reads per unit. NaN is not > 0."""
    dead = 0
    for u in range(x3.shape[1]):
        alive = False
        for o in range(x3.shape[0]):
            for i in range(x3.shape[2]):
                if x3[o, u, i] > 0:
                    alive = True
                    break
            if alive:
                break
        dead += not alive
    return dead


@_jit
def activation_row(x3, blocks, block, lo, hi, total, nan, inf, out):
    """out = stats.RAW + (dead_frac, saturated_frac) of one module output.

    x3 is the output as [outer, units, inner] in memory order. With `blocks` empty, every value
    is read and every statistic is exact. Otherwise the caller passes the exact `total`, `nan`
    and `inf` (one full torch sum), and the spread, l1, nonzero, range and saturation come from
    the runs x[b * block:(b + 1) * block] of the flat output for b in `blocks`.
    """
    flat = x3.reshape(-1)
    n = flat.shape[0]
    if blocks.shape[0] == 0:
        s1, s2, sa, nz, top, bottom, sat = _moments_banded(flat, 0.0, lo, hi)
        nan = inf = 0
        if not np.isfinite(s1):
            nan, inf = _nonfinite(flat)
        total, l2, k, scale = s1, np.sqrt(s2), n, 1.0
    else:
        sub = np.empty(blocks.shape[0] * block, flat.dtype)
        for j in range(blocks.shape[0]):
            at = blocks[j] * block
            for i in range(block):
                sub[j * block + i] = flat[at + i]
        k = sub.shape[0]
        s1, s2, sa, nz, top, bottom, sat = _moments_banded(sub, 0.0, lo, hi)
        if not np.isfinite(s1) and _nonfinite(sub)[0]:
            top = bottom = np.nan
        # The norm that, with the exact total, gives the subsample's variance in finish().
        square = (s2 - s1 * s1 / k) / (k - 1) * (n - 1) + total * total / n
        l2 = np.sqrt(max(square, 0.0)) if np.isfinite(square) else np.nan
        scale = n / k
    if nan:
        top = bottom = np.nan
    out[0] = total
    out[1] = l2
    out[2] = sa * scale
    out[3] = nz * scale
    out[4] = top
    out[5] = -bottom
    out[6] = nan
    out[7] = inf
    out[8] = dead_units(x3) / max(x3.shape[1], 1)
    out[9] = sat / k if np.isfinite(lo) else np.nan


@_jit
def feature_profile(x3, stride, idx, packed, windows, samples):
    """The moments of each feature f, whose values are x3[:, f, :] in (outer, inner) order.

    packed[f, :4] = mean, std, min, max, taken around the feature's first value (no
    cancellation for offset data such as years), and packed[f, 6:8] = NaN and Inf counts.
    windows[f] receives every `stride`-th value, for the caller's n_unique and int_frac (numpy
    sorts far faster), samples[f] the values at positions `idx`.
    """
    outer, features, inner = x3.shape
    count = outer * inner
    values = np.empty(count, x3.dtype)  # one feature's values, contiguous
    for f in range(features):
        for o in range(outer):
            values[o * inner:(o + 1) * inner] = x3[o, f]
        shift = np.float64(values[0]) if count else 0.0
        shift = shift if np.isfinite(shift) else 0.0
        s1, s2, _, _, top, bottom, _ = _moments_banded(values, shift, -np.inf, np.inf)
        nan = inf = 0
        if not np.isfinite(s1):
            nan, inf = _nonfinite(values)
        var = (s2 - s1 * s1 / count) / (count - 1) if count > 1 else np.nan
        packed[f, 0] = shift + s1 / count
        packed[f, 1] = np.sqrt(var) if var > 0 else (0.0 if var <= 0 else np.nan)
        packed[f, 2] = bottom + shift if not nan else np.nan
        packed[f, 3] = top + shift if not nan else np.nan
        packed[f, 6] = nan
        packed[f, 7] = inf
        for j in range(windows.shape[1]):
            windows[f, j] = values[j * stride]
        for j in range(idx.shape[0]):
            samples[f, j] = values[idx[j]]


def warm_up() -> None:
    """Compile (or load from the disk cache) the float32 kernels now, not inside a training
    step: the first compilation takes seconds, a load from the cache a fraction of one."""
    x = np.zeros(8, np.float32)
    raw = np.empty((2, 8))
    table = np.array([[x.ctypes.data, 8]])
    tensor_stats(table, table[:0], x, raw)
    tensor_stats(table[:0], table, x[:0], raw)
    gather(table, np.empty(8, np.float32))
    activation_row(x.reshape(2, 2, 2), np.empty(0, np.int64), 1, -np.inf, np.inf, 0.0, 0.0, 0.0,
                   np.empty(10))
    feature_profile(x.reshape(2, 2, 2), 1, np.zeros(1, np.int64), np.empty((2, 8)),
                    np.empty((2, 4), np.float32), np.empty((2, 1)))
