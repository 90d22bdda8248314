"""Compiled kernels (numba) for module outputs and input batches: the activation row (dead units,
and a subsample's moments and saturation), the per-feature input profile, the samples reservoir's
offers and the rows' fingerprints. numba_kernels gives them with the tensor kernels."""
from __future__ import annotations

import numba
import numpy as np

from tracelab.recorders.kernel_primitives import FAST, add, finite, fmax, fmin, jit, nonfinite


@jit
def _moments_banded(x, shift, lo, hi):
    """(sum, sum of squares, sum of |w|, nonzero) of w = v - shift over the values v of x
    (nonzero counts v != 0), their (max, min), and the count of v outside (lo, hi). The range
    is of v itself: next to a huge shift a small value would vanish from v - shift. Max and min
    are meaningless when x holds a NaN: callers look for NaN when the sum is not finite."""
    acc = (0.0, 0.0, 0.0, 0, -np.inf, np.inf)
    sat = 0
    for i in range(x.shape[0]):
        v = x[i]
        w = np.float64(v) - shift
        acc = add(acc, v, w, np.float64(v))
        sat += (v <= lo) | (v >= hi)
    s1, s2, sa, nz, top, bottom = acc
    return s1, s2, sa, nz, top, bottom, sat


# Values per partial sum in the values' own type: a float32 sum of 256 values stays within
# about 1e-6 of its sum of |v|, and its vector lanes take twice the values of float64 ones.
_LANES = 256


@numba.njit(inline="always", nogil=True, fastmath=FAST)
def _total(x):
    """(sum, NaN count, Inf count) of the values of x: the sum of each _LANES values in their own
    type, the partial sums in float64; NaN and Inf counted only when the sum is not finite, and
    the sum taken again in float64 when finite values overflowed float32."""
    total = 0.0
    for at in range(0, x.shape[0], _LANES):
        part = x[at:at + _LANES]
        s = x.dtype.type(0)
        for i in range(part.shape[0]):
            s += part[i]
        total += np.float64(s)
    nan = inf = 0
    if not finite(total):
        nan, inf = nonfinite(x)
        if not (nan or inf):
            total = 0.0
            for i in range(x.shape[0]):
                total += np.float64(x[i])
    return total, nan, inf


@jit
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


@jit
def activation_row(x3, blocks, block, lo, hi, summed, out):
    """out = stats.RAW + (dead_frac, saturated_frac) of one module output.

    x3 is the output as [outer, units, inner] in memory order. With `blocks` empty, every value
    is read and every statistic is exact. Otherwise the sum and the NaN and Inf counts are
    still exact: `summed` holds them (a caller's full sum) or is empty, and then one pass
    that only sums takes them. The spread, l1, nonzero, range and saturation come from the
    runs x[b * block:(b + 1) * block] of the flat output for b in `blocks`.
    """
    flat = x3.reshape(-1)
    n = flat.shape[0]
    if blocks.shape[0] == 0:
        s1, s2, sa, nz, top, bottom, sat = _moments_banded(flat, 0.0, lo, hi)
        nan = inf = 0
        if not finite(s1):
            nan, inf = nonfinite(flat)
        total, l2, k, scale = s1, np.sqrt(s2), n, 1.0
    else:
        if summed.shape[0]:
            total, nan, inf = summed[0], summed[1], summed[2]
        else:
            total, nan, inf = _total(flat)
        sub = np.empty(blocks.shape[0] * block, flat.dtype)
        for j in range(blocks.shape[0]):
            at = blocks[j] * block
            for i in range(block):
                sub[j * block + i] = flat[at + i]
        k = sub.shape[0]
        s1, s2, sa, nz, top, bottom, sat = _moments_banded(sub, 0.0, lo, hi)
        if not finite(s1) and nonfinite(sub)[0]:
            top = bottom = np.nan
        # The norm that, with the exact total, gives the subsample's variance in finish().
        square = (s2 - s1 * s1 / k) / (k - 1) * (n - 1) + total * total / n
        l2 = np.sqrt(max(square, 0.0)) if finite(square) else np.nan
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


@jit
def feature_profile(x3, stride, idx, packed, windows, samples):
    """The moments of each feature f, whose values are x3[:, f, :] in (outer, inner) order.

    packed[f, :4] = mean, std, min, max, the moments taken around the feature's first value
    (no cancellation for offset data such as years), packed[f, 5] = int_frac and
    packed[f, 6:8] = NaN and Inf counts. windows[f] receives every `stride`-th value, for the
    caller's n_unique (numpy sorts far faster), whose int_frac this is; samples[f] the values
    at positions `idx`. A table (inner 1) is read row by row: table_profile.
    """
    outer, features, inner = x3.shape
    if inner == 1:
        table_profile(x3.reshape(outer, features), stride, idx, packed, windows, samples)
        return
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
        if not finite(s1):
            nan, inf = nonfinite(values)
        _finish_feature(packed, f, s1, s2, count, shift, top, bottom, nan, inf)
        ints = 0
        for j in range(windows.shape[1]):
            v = values[j * stride]
            windows[f, j] = v
            ints += v == np.floor(v)  # an integer, or an infinity; never NaN
        packed[f, 5] = ints / windows.shape[1]
        for j in range(idx.shape[0]):
            samples[f, j] = values[idx[j]]


_TILE = 16  # rows and features of a tile of table_profile's transposing copy


@jit
def table_profile(x, stride, idx, packed, windows, samples):
    """feature_profile of a [values, features] table, read in memory order: every feature's
    aggregates advance together along a row, in vector lanes, where a pass per feature would
    read the table a column at a time, a cache line per value."""
    count, features = x.shape
    shift = np.zeros(features)
    s1 = np.zeros(features)
    s2 = np.zeros(features)
    far = x.dtype.type(np.inf)
    top = np.full(features, -far)
    bottom = np.full(features, far)
    if count:
        for f in range(features):
            first = np.float64(x[0, f])
            shift[f] = first if np.isfinite(first) else 0.0
    for o in range(count):
        row = x[o]
        for f in range(features):
            v = row[f]
            w = np.float64(v) - shift[f]
            s1[f] += w
            s2[f] += w * w
            top[f] = fmax(top[f], v)
            bottom[f] = fmin(bottom[f], v)
    for f in range(features):
        nan = inf = 0
        if not finite(s1[f]):
            nan, inf = nonfinite(x[:, f])
        _finish_feature(packed, f, s1[f], s2[f], count, shift[f], top[f], bottom[f], nan, inf)
    n = windows.shape[1]
    ints = np.zeros(features, np.int64)
    for j in range(n):
        row = x[j * stride]
        for f in range(features):
            v = row[f]
            ints[f] += v == np.floor(v)
    for f in range(features):
        packed[f, 5] = ints[f] / n
    # The windows are the table's rows transposed, copied a tile at a time: a row's values
    # written straight into as many window rows, whose addresses share a few cache sets,
    # evicted each other's lines (3.4 times the time of the tiles at 384 rows x 256 features).
    for start in range(0, n, _TILE):
        end = min(start + _TILE, n)
        for first in range(0, features, _TILE):
            for f in range(first, min(first + _TILE, features)):
                for j in range(start, end):
                    windows[f, j] = x[j * stride, f]
    for j in range(idx.shape[0]):
        row = x[idx[j]]
        for f in range(features):
            samples[f, j] = row[f]


@jit
def sorted_distinct(ordered, cap, packed):
    """packed[f, 4] = the distinct values of each sorted row ordered[f], at most `cap` (each
    NaN counted apart, as numpy's != counts them)."""
    for f in range(ordered.shape[0]):
        row = ordered[f]
        distinct = 1 if row.shape[0] else 0
        for j in range(1, row.shape[0]):
            distinct += row[j] != row[j - 1]
        packed[f, 4] = min(distinct, cap)


@numba.njit(inline="always", nogil=True)
def _finish_feature(packed, f, s1, s2, count, shift, top, bottom, nan, inf):
    var = (s2 - s1 * s1 / count) / (count - 1) if count > 1 else np.nan
    packed[f, 0] = shift + s1 / count
    packed[f, 1] = np.sqrt(var) if var > 0 else (0.0 if var <= 0 else np.nan)
    packed[f, 2] = bottom if not nan else np.nan
    packed[f, 3] = top if not nan else np.nan
    packed[f, 6] = nan
    packed[f, 7] = inf


# The longest gap Algorithm L draws: far beyond any stream, and no int64 overflow.
_FAR = 1 << 62


@numba.njit(inline="always", nogil=True)
def gap(w, u):
    """Values passed over before the next one kept: floor(log(u) / log(1 - w)), u in (0, 1]."""
    g = np.log(u) / np.log1p(-w)
    return np.int64(g) if g < _FAR else _FAR  # also NaN and +Inf (w of 0)


@jit
def reservoir_offer(values, rows, seen, kept, steps, step, weight, next_at, pool, at, start):
    """Uniform samples, many at once: the finite values of values[j] are offered in order to
    sample rows[j] (of `kept`, with their `step` in `steps`), which has had seen[r] values
    offered so far (updated).

    A sample without Algorithm L's state (weight[r] of 0) takes Algorithm R: a value is kept
    in slot seen[r] while the sample is not full, else in slot floor(u * (seen[r] + 1)) when
    that is a slot. Once the caller has set the state (its W in weight[r], the stream index
    of the next value kept in next_at[r]), the gaps between kept values are drawn: a value
    passed over costs no random number, and a row with none kept costs one count of its
    finite values.

    The uniforms u come from pool[at:], from the caller's generator. Returns (j, at): rows from
    `start` up to j are done; j < len(values) when the pool ran short, and the caller refills
    it and calls again from j (a row needs at most 3 * values.shape[1] of them)."""
    size = kept.shape[1]
    width = values.shape[1]
    for j in range(start, values.shape[0]):
        if pool.shape[0] - at < 3 * width:
            return j, at
        r = rows[j]
        n = seen[r]
        w = weight[r]
        if w == 0.0:  # Algorithm R
            for i in range(width):
                v = values[j, i]
                if not np.isfinite(v):
                    continue
                slot = n
                if n >= size:
                    slot = np.int64(pool[at] * (n + 1))
                    at += 1
                if slot < size:
                    kept[r, slot] = v
                    steps[r, slot] = step
                n += 1
        elif next_at[r] >= n + width:  # Algorithm L, and no value of this row is kept
            for i in range(width):
                n += np.isfinite(values[j, i])
        else:
            for i in range(width):
                v = values[j, i]
                if not np.isfinite(v):
                    continue
                if n == next_at[r]:
                    slot = np.int64(pool[at] * size)
                    kept[r, slot] = v
                    steps[r, slot] = step
                    w *= np.exp(np.log(1.0 - pool[at + 1]) / size)
                    next_at[r] = n + 1 + gap(w, 1.0 - pool[at + 2])
                    at += 3
                n += 1
            weight[r] = w
        seen[r] = n
    return values.shape[0], at


@jit
def row_hashes(bits, coefficients, out):
    """out[r] += the sum over j of bits[r, j] * coefficients[j], in wrapping int64 arithmetic
    (as torch computes it), for each row r of bits (int64)."""
    for r in range(bits.shape[0]):
        h = out[r]
        for j in range(bits.shape[1]):
            h += np.int64(bits[r, j]) * coefficients[j]
        out[r] = h
