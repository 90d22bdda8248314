"""Compiled one-pass statistics for the CPU recorder (numba).

On the CPU every statistic of a tensor is a pass over its memory, and inside a training loop
each small torch call costs tens of microseconds. These kernels read each value once and keep
every aggregate of the trace's tensor row at the same time, in loops the compiler vectorizes: the
sum and the sum of squares in float64, the range in the values' own type, and for float32 values
the sum of |v| and the nonzero count in float32 lanes within a block of 2,048 values, then in
float64 and int64 (twice the values per instruction; such a count is exact, and a |v| sum that
overflows float32 is taken again in float64). One call covers all of a model's weights, grads
and updates: the tensors are passed as (address, size) rows, so that no copy is made and no call
is spent per tensor. They release the GIL.

The aggregates are stats.RAW: sum, l2 (the norm), l1, nonzero, max, negmin, nan, inf. A NaN
makes max and min NaN (as in torch and numpy); NaN counts as nonzero.
"""
from __future__ import annotations

import platform

import numpy as np

try:
    import numba
except ImportError as exc:  # recorders.kernel_loader then falls back to torch
    raise ImportError("numba is not installed (pip install 'tracelab[torch]')") from exc
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

# Reassociation lets the compiler split each sum into vector lanes; NaN and Inf keep their IEEE
# meaning (no nnan/ninf), because they are what the rules look for. Only the running max and
# min (_max, _min) assume no NaN, and their callers count NaN before they trust them.
_FAST = {"reassoc", "nsz", "contract"}


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


def _float_extreme(name):
    """An intrinsic calling llvm.maxnum or llvm.minnum with the nnan and nsz flags: the loops
    that keep a running extreme then vectorize into plain vector max and min instructions.
    Under nnan a NaN operand makes the result meaningless, so callers count NaN (when the sum
    is not finite) and report the range as NaN themselves."""
    @intrinsic
    def extreme(typingctx, a, b):
        def codegen(context, builder, signature, args):
            kind = args[0].type
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(kind, [kind, kind]),
                f"llvm.{name}.{'f32' if kind == ir.FloatType() else 'f64'}")
            return builder.call(fn, args, fastmath=("nnan", "nsz"))
        return a(a, b), codegen
    return extreme


_max = _float_extreme("maxnum")
_min = _float_extreme("minnum")


# The register class of a float in inline assembly: SSE/AVX on x86-64, FP/SIMD on AArch64.
_FLOAT_REGISTER = {"x86_64": "x", "amd64": "x", "aarch64": "w", "arm64": "w"}.get(
    platform.machine().lower())


@intrinsic
def _opaque(typingctx, x):
    """x, through an empty inline-assembly barrier that the optimizer cannot see into (on
    other architectures x itself; the randomized NaN/Inf tests then guard the kernels)."""
    def codegen(context, builder, signature, args):
        if _FLOAT_REGISTER is None:
            return args[0]
        kind = args[0].type
        return builder.asm(ir.FunctionType(kind, [kind]), "", f"={_FLOAT_REGISTER},0",
                           [args[0]], side_effect=False)
    return x(x), codegen


@numba.njit(inline="always", nogil=True)
def _finite(total):
    """Whether a sum taken under _FAST is finite. LLVM has folded np.isfinite of such a sum to
    True (a block's float64 sum under reassoc and nsz, in a nested loop), so the test reads
    the value through _opaque."""
    return np.isfinite(_opaque(total))


@numba.njit(inline="always", nogil=True, fastmath=_FAST)
def _add(acc, v, w, r):
    """The running (sum, sum of squares, sum of |w|, nonzero, max, min) with one more value:
    w (float64) to the sums, v to the nonzero count, r to the range."""
    s1, s2, sa, nz, top, bottom = acc
    return s1 + w, s2 + w * w, sa + abs(w), nz + (v != 0), _max(top, r), _min(bottom, r)


@_jit
def _moments_banded(x, shift, lo, hi):
    """(sum, sum of squares, sum of |w|, nonzero, max, min) of w = v - shift over the values v
    of x (nonzero counts v != 0), and the count of v outside (lo, hi). Max and min are
    meaningless when x holds a NaN: callers look for NaN when the sum is not finite."""
    acc = (0.0, 0.0, 0.0, 0, -np.inf, np.inf)
    sat = 0
    for i in range(x.shape[0]):
        v = x[i]
        w = np.float64(v) - shift
        acc = _add(acc, v, w, w)
        sat += (v <= lo) | (v >= hi)
    s1, s2, sa, nz, top, bottom = acc
    return s1, s2, sa, nz, top, bottom, sat


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


_BLOCK = 2048  # values read per block: a block (and its copies) stays in the L1 cache


@numba.njit(inline="always", nogil=True, fastmath=_FAST)
def _wide_pass(x):
    """(sum, sum of squares, sum of |v|, nonzero, max, min) of the values v of x in one loop,
    every aggregate in float64 lanes. Max and min are meaningless when x holds a NaN: callers
    look for NaN when the sum is not finite."""
    acc = (0.0, 0.0, 0.0, 0, x.dtype.type(-np.inf), x.dtype.type(np.inf))
    for i in range(x.shape[0]):
        acc = _add(acc, x[i], np.float64(x[i]), x[i])
    return acc


@numba.njit(inline="always", nogil=True, fastmath=_FAST)
def _narrow_block(xs):
    """_wide_pass of at most _BLOCK float32 values in two loops: the sum and the sum of squares
    in float64, then |v|, the nonzero count and the range in float32 lanes, twice as many per
    instruction (a count below 2 ** 24 is exact in float32; a float32 sum of |v| that overflows
    is taken again in float64). Half the time of one loop of float64 lanes for all six."""
    s1 = s2 = 0.0
    for i in range(xs.shape[0]):
        w = np.float64(xs[i])
        s1 += w
        s2 += w * w
    one, zero = xs.dtype.type(1), xs.dtype.type(0)
    sa = nz = zero
    top, bottom = xs.dtype.type(-np.inf), xs.dtype.type(np.inf)
    for i in range(xs.shape[0]):
        v = xs[i]
        sa += abs(v)
        nz += one if v != 0 else zero  # a count in integer lanes would be widened to int64
        top = _max(top, v)
        bottom = _min(bottom, v)
    l1 = np.float64(sa)
    if not _finite(l1) and _finite(s1):  # finite values whose float32 |v| sum overflowed
        l1 = 0.0
        for i in range(xs.shape[0]):
            l1 += abs(np.float64(xs[i]))
    return s1, s2, l1, np.int64(nz), top, bottom


@numba.njit(inline="always", nogil=True, fastmath=_FAST)
def _merge(acc, block):
    return (acc[0] + block[0], acc[1] + block[1], acc[2] + block[2], acc[3] + block[3],
            _max(acc[4], block[4]), _min(acc[5], block[5]))


@numba.njit(inline="always", nogil=True, fastmath=_FAST)
def _pass(x):
    """(sum, sum of squares, sum of |v|, nonzero, max, min) of the values v of x, the sums in
    float64 (|v| first in float32 within a block of float32 values). Max and min are
    meaningless when x holds a NaN: callers look for NaN when the sum is not finite."""
    if x.itemsize != 4:
        acc = _wide_pass(x)
    else:
        far = x.dtype.type(np.inf)
        acc = (0.0, 0.0, 0.0, 0, -far, far)
        for start in range(0, x.shape[0], _BLOCK):
            acc = _merge(acc, _narrow_block(x[start:start + _BLOCK]))
    s1, s2, sa, nz, top, bottom = acc
    return s1, s2, sa, nz, np.float64(top), np.float64(bottom)


@_jit
def _raw(x, out):
    """out[:8] = stats.RAW of x."""
    s1, s2, sa, nz, top, bottom = _pass(x)
    nan = inf = 0
    if not _finite(s1):
        nan, inf = _nonfinite(x)
    _store(out, s1, s2, sa, nz, top, bottom, nan, inf, x.shape[0])


@intrinsic
def _memcpy(typingctx, destination, source, count):
    """memcpy(destination, source, count bytes) of int64 addresses."""
    def codegen(context, builder, signature, args):
        dst, src = (builder.inttoptr(a, cgutils.voidptr_t) for a in args[:2])
        cgutils.raw_memcpy(builder, dst, src, args[2], 1)
        return context.get_dummy_value()
    return types.void(types.int64, types.int64, types.int64), codegen


@numba.njit(inline="always", nogil=True, fastmath=_FAST)
def _narrow_pair(xs, olds):
    """_narrow_block of xs and of d = xs - olds at once (d in float32, as torch subtracts)."""
    s1 = s2 = d1 = d2 = 0.0
    for i in range(xs.shape[0]):
        w = np.float64(xs[i])
        e = np.float64(xs[i] - olds[i])
        s1 += w
        s2 += w * w
        d1 += e
        d2 += e * e
    one, zero = xs.dtype.type(1), xs.dtype.type(0)
    sa = nz = da = dz = zero
    far = xs.dtype.type(np.inf)
    top, bottom, dtop, dbottom = -far, far, -far, far
    for i in range(xs.shape[0]):
        v = xs[i]
        d = v - olds[i]
        sa += abs(v)
        da += abs(d)
        nz += one if v != 0 else zero
        dz += one if d != 0 else zero
        top = _max(top, v)
        bottom = _min(bottom, v)
        dtop = _max(dtop, d)
        dbottom = _min(dbottom, d)
    l1, dl1 = np.float64(sa), np.float64(da)
    if not (_finite(l1) and _finite(dl1)) and _finite(s1) and _finite(d1):
        l1 = dl1 = 0.0  # finite values whose float32 |v| sums overflowed
        for i in range(xs.shape[0]):
            l1 += abs(np.float64(xs[i]))
            dl1 += abs(np.float64(xs[i] - olds[i]))
    return ((s1, s2, l1, np.int64(nz), top, bottom),
            (d1, d2, dl1, np.int64(dz), dtop, dbottom))


@numba.njit(inline="always", nogil=True, fastmath=_FAST)
def _wide_pair(xs, olds):
    """_wide_pass of xs and of d = xs - olds at once."""
    far = xs.dtype.type(np.inf)
    acc = block = (0.0, 0.0, 0.0, 0, -far, far)
    for i in range(xs.shape[0]):
        v = xs[i]
        d = v - olds[i]
        acc = _add(acc, v, np.float64(v), v)
        block = _add(block, d, np.float64(d), d)
    return acc, block


@_jit
def _raw_with_update(x, old, out, update, keep):
    """out[:8] = stats.RAW of x, and update[:8] = those of d = x - old (in x's precision, as
    torch subtracts), in one pass over both, a block at a time. keep: old then holds x, the next
    update's "before", written a block at a time behind the reads (a block whose update is not
    finite is counted for NaN and Inf first, while it still holds the old values)."""
    far = x.dtype.type(np.inf)
    acc = diff = (0.0, 0.0, 0.0, 0, -far, far)
    nan = inf = 0
    n = x.shape[0]
    for start in range(0, n, _BLOCK):
        # Slices indexed from 0: an index from `start` costs a negative-index check per read.
        xs, olds = x[start:start + _BLOCK], old[start:start + _BLOCK]
        if x.itemsize == 4:
            values, block = _narrow_pair(xs, olds)
        else:
            values, block = _wide_pair(xs, olds)
        if not _finite(block[0]):
            for i in range(xs.shape[0]):
                d = xs[i] - olds[i]
                nan += np.isnan(d)
                inf += np.isinf(d)
        if keep:
            _memcpy(olds.ctypes.data, xs.ctypes.data, xs.shape[0] * x.itemsize)
        acc, diff = _merge(acc, values), _merge(diff, block)
    s1, s2, sa, nz, top, bottom = acc
    x_nan, x_inf = _nonfinite(x) if not _finite(s1) else (0, 0)
    _store(out, s1, s2, sa, nz, np.float64(top), np.float64(bottom), x_nan, x_inf, n)
    s1, s2, sa, nz, top, bottom = diff
    _store(update, s1, s2, sa, nz, np.float64(top), np.float64(bottom), nan, inf, n)


def tensor_stats(weights, grads, before, out, keep=False):
    """stats.RAW of tensors given by (address, size) rows, with no copy.

    out holds a row per tensor of `weights`, then of `grads`, then, when `before` is not empty,
    of each weight's update: the weight minus its earlier value in `before` (the weights
    before the optimizer step, one after another, from `gather`). Every tensor is contiguous
    and of before's dtype (float32 or float64). keep: `before` is left holding the weights as
    they are now, the next step's "before" (what `gather` would copy), at no extra pass.
    """
    _tensor_stats(weights, grads, before, out, keep)


@_jit
def _tensor_stats(weights, grads, before, out, keep):
    at = 0
    for t in range(weights.shape[0]):
        x = numba.carray(_pointer(weights[t, 0]), weights[t, 1], before.dtype)
        if before.shape[0]:
            update = out[weights.shape[0] + grads.shape[0] + t]
            _raw_with_update(x, before[at:at + x.shape[0]], out[t], update, keep)
            at += x.shape[0]
        else:
            _raw(x, out[t])
    for t in range(grads.shape[0]):
        x = numba.carray(_pointer(grads[t, 0]), grads[t, 1], before.dtype)
        _raw(x, out[weights.shape[0] + t])


@_jit
def unchanged(tensors, before, probes):
    """Whether `probes` values spread evenly over each tensor of (address, size) rows equal
    their copies in `before` (NaN equal to NaN, 0.0 to -0.0), laid out as `gather` copies them,
    first and last values included: a cheap check that the weights were not changed since."""
    at = 0
    for t in range(tensors.shape[0]):
        n = tensors[t, 1]
        x = numba.carray(_pointer(tensors[t, 0]), n, before.dtype)
        count = min(probes, n)
        for j in range(count):
            i = j * (n - 1) // max(count - 1, 1)
            v = x[i]
            b = before[at + i]
            if v != b and not (np.isnan(v) and np.isnan(b)):
                return False
        at += n
    return True


@_jit
def gather(tensors, out):
    """Copy the contiguous tensors of (address, size) rows `tensors` (of out's dtype) into out,
    one after another."""
    at = out.ctypes.data
    for t in range(tensors.shape[0]):
        count = tensors[t, 1] * out.itemsize
        _memcpy(at, tensors[t, 0], count)
        at += count


@_jit
def extremes(x, out):
    """out = [min, max, NaN count, Inf count] of the values of x, the batch sentinel's row:
    min and max are NaN when x holds a NaN (as torch.aminmax gives them). One `_raw` pass."""
    raw = np.empty(8)
    _raw(x, raw)
    out[0] = -raw[5]
    out[1] = raw[4]
    out[2] = raw[6]
    out[3] = raw[7]


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
        if not _finite(s1):
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
        if not _finite(s1) and _nonfinite(sub)[0]:
            top = bottom = np.nan
        # The norm that, with the exact total, gives the subsample's variance in finish().
        square = (s2 - s1 * s1 / k) / (k - 1) * (n - 1) + total * total / n
        l2 = np.sqrt(max(square, 0.0)) if _finite(square) else np.nan
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
        for o in range(outer):  # a loop: a slice assignment per row costs more than it copies
            for i in range(inner):
                values[o * inner + i] = x3[o, f, i]
        shift = np.float64(values[0]) if count else 0.0
        shift = shift if np.isfinite(shift) else 0.0
        s1, s2, _, _, top, bottom, _ = _moments_banded(values, shift, -np.inf, np.inf)
        nan = inf = 0
        if not _finite(s1):
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


@_jit
def reservoir_offer(values, rows, seen, kept, steps, step, uniforms):
    """Algorithm R for many samples at once: the finite values of values[j] are offered in
    order to sample rows[j] (of `kept`, with their `step` in `steps`), which has had seen[r]
    values offered so far (updated). A value is kept in slot seen[r] while the sample is not
    full, else in slot floor(u * (seen[r] + 1)) when that is a slot, with u the next of
    `uniforms` (at least one per value, from the caller's generator)."""
    size = kept.shape[1]
    u = 0
    for j in range(values.shape[0]):
        r = rows[j]
        n = seen[r]
        for i in range(values.shape[1]):
            v = values[j, i]
            if not np.isfinite(v):
                continue
            slot = n if n < size else np.int64(uniforms[u] * (n + 1))
            u += 1
            if slot < size:
                kept[r, slot] = v
                steps[r, slot] = step
            n += 1
        seen[r] = n


@_jit
def row_hashes(bits, coefficients, out):
    """out[r] += the sum over j of bits[r, j] * coefficients[j], in wrapping int64 arithmetic
    (as torch computes it), for each row r of bits (int64)."""
    for r in range(bits.shape[0]):
        h = out[r]
        for j in range(bits.shape[1]):
            h += np.int64(bits[r, j]) * coefficients[j]
        out[r] = h


def warm_up() -> None:
    """Compile (or load from the disk cache) the float32 kernels now, not inside a training
    step: the first compilation takes seconds, a load from the cache a fraction of one."""
    x = np.zeros(8, np.float32)
    raw = np.empty((2, 8))
    table = np.array([[x.ctypes.data, 8]])
    tensor_stats(table, table[:0], x, raw)
    tensor_stats(table, table[:0], x.copy(), raw, True)
    tensor_stats(table[:0], table, x[:0], raw)
    unchanged(table, x, 4)
    gather(table, np.empty(8, np.float32))
    activation_row(x.reshape(2, 2, 2), np.empty(0, np.int64), 1, -np.inf, np.inf, 0.0, 0.0, 0.0,
                   np.empty(10))
    feature_profile(x.reshape(2, 2, 2), 1, np.zeros(1, np.int64), np.empty((2, 8)),
                    np.empty((2, 4), np.float32), np.empty((2, 1)))
    reservoir_offer(np.zeros((1, 2)), np.zeros(1, np.int64), np.zeros(1, np.int64),
                    np.empty((1, 1)), np.empty((1, 1), np.int64), 0, np.zeros(2))
    row_hashes(np.zeros((2, 4), np.int64), np.ones(4, np.int64), np.zeros(2, np.int64))
    extremes(x, np.empty(4))
