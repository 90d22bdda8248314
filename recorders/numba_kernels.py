"""Compiled one-pass statistics for the CPU recorder (numba).

On the CPU every statistic of a tensor is a pass over its memory, and inside a training loop
each small torch call costs tens of microseconds. These kernels read each value once and keep
every aggregate of the trace's tensor row at the same time, in loops the compiler vectorizes: the
sum and the sum of squares in float64, the range in the values' own type, and for float32 values
the sum of |v| and the nonzero count in float32 lanes over 1024 values at a time, then in
float64 and int64 (twice the values per instruction; such a count is exact, and a |v| sum that
overflows float32 is taken again in float64). One call covers all of a model's weights, grads
and updates: the tensors are passed as (address, size) rows, so that no copy is made and no call
is spent per tensor, and the pass is shared with torch's idle OpenMP workers (omp_team). They
release the GIL. The kernels for module outputs and input batches are
in batch_kernels.py, the shared building blocks in kernel_primitives.py; this module gives all
of them to the recorder (kernel_loader).

The aggregates are stats.RAW: sum, l2 (the norm), l1, nonzero, max, negmin, nan, inf. A NaN
makes max and min NaN (as in torch and numpy); NaN counts as nonzero.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import types

from tracelab.recorders import omp_team
# The loader's one namespace holds every kernel: these are for module outputs and batches.
from tracelab.recorders.batch_kernels import (  # noqa: F401
    activation_row, dead_units, feature_profile, reservoir_offer, row_hashes, sorted_distinct)
from tracelab.recorders.kernel_primitives import (
    FAST, add, address_of, call, fetch_add, finite, fmax, fmin, jit, memcpy, nonfinite, pointer,
    run_team, store)

_BLOCK = 2048  # values read per block: a block (and its copies) stays in the L1 cache
# float32 values per float32 partial sum of |v|. The compiler spreads such a sum over 64 vector
# lanes of 16 values, then adds the lanes: about 22 roundings, at most ~1.3e-6 of the sum (1e-7
# typically). 1024 in place of 256 takes a tenth off the pass: fewer reductions across lanes.
_LANES = 1024


@numba.njit(inline="always", nogil=True, fastmath=FAST)
def _wide_pass(x):
    """(sum, sum of squares, sum of |v|, nonzero, max, min) of the values v of x in one loop,
    every aggregate in float64 lanes. Max and min are meaningless when x holds a NaN: callers
    look for NaN when the sum is not finite."""
    acc = (0.0, 0.0, 0.0, 0, x.dtype.type(-np.inf), x.dtype.type(np.inf))
    for i in range(x.shape[0]):
        acc = add(acc, x[i], np.float64(x[i]), x[i])
    return acc


@numba.njit(inline="always", nogil=True, fastmath=FAST)
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
    l1, nz = 0.0, 0
    top, bottom = xs.dtype.type(-np.inf), xs.dtype.type(np.inf)
    for at in range(0, xs.shape[0], _LANES):
        part = xs[at:at + _LANES]
        sa = count = zero
        for i in range(part.shape[0]):
            v = part[i]
            sa += abs(v)
            count += one if v != 0 else zero  # integer lanes would be widened to int64
            top = fmax(top, v)
            bottom = fmin(bottom, v)
        l1 += np.float64(sa)
        nz += np.int64(count)
    if not finite(l1) and finite(s1):  # finite values whose float32 |v| sum overflowed
        l1 = _wide_pass(xs)[2]
    return s1, s2, l1, nz, top, bottom


@numba.njit(inline="always", nogil=True, fastmath=FAST)
def _merge(acc, block):
    return (acc[0] + block[0], acc[1] + block[1], acc[2] + block[2], acc[3] + block[3],
            fmax(acc[4], block[4]), fmin(acc[5], block[5]))


@numba.njit(inline="always", nogil=True, fastmath=FAST)
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


@jit
def _raw(x, out):
    """out[:8] = stats.RAW of x."""
    s1, s2, sa, nz, top, bottom = _pass(x)
    nan = inf = 0
    if not finite(s1):
        nan, inf = nonfinite(x)
    store(out, s1, s2, sa, nz, top, bottom, nan, inf, x.shape[0])


@numba.njit(inline="always", nogil=True, fastmath=FAST)
def _wide_pair(xs, olds):
    """_wide_pass of xs and of d = xs - olds at once."""
    far = xs.dtype.type(np.inf)
    acc = block = (0.0, 0.0, 0.0, 0, -far, far)
    for i in range(xs.shape[0]):
        v = xs[i]
        d = v - olds[i]
        acc = add(acc, v, np.float64(v), v)
        block = add(block, d, np.float64(d), d)
    return acc, block


@numba.njit(inline="always", nogil=True, fastmath=FAST)
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
    l1, nz, dl1, dnz = 0.0, 0, 0.0, 0
    far = xs.dtype.type(np.inf)
    top, bottom, dtop, dbottom = -far, far, -far, far
    for at in range(0, xs.shape[0], _LANES):
        part, old_part = xs[at:at + _LANES], olds[at:at + _LANES]
        sa = da = count = dcount = zero
        for i in range(part.shape[0]):
            v = part[i]
            d = v - old_part[i]
            sa += abs(v)
            da += abs(d)
            count += one if v != 0 else zero
            dcount += one if d != 0 else zero
            top = fmax(top, v)
            bottom = fmin(bottom, v)
            dtop = fmax(dtop, d)
            dbottom = fmin(dbottom, d)
        l1 += np.float64(sa)
        dl1 += np.float64(da)
        nz += np.int64(count)
        dnz += np.int64(dcount)
    redo, redo_d = not finite(l1) and finite(s1), not finite(dl1) and finite(d1)
    if redo or redo_d:  # finite values whose float32 |v| sum overflowed
        wide, wide_d = _wide_pair(xs, olds)
        if redo:
            l1 = wide[2]
        if redo_d:
            dl1 = wide_d[2]
    return (s1, s2, l1, nz, top, bottom), (d1, d2, dl1, dnz, dtop, dbottom)


@numba.njit(inline="always", nogil=True, fastmath=FAST)
def _part(at, acc, nan, inf):
    """Write a pass's (sum, sum of squares, sum of |v|, nonzero, max, min) and NaN and Inf
    counts at the address `at` (8 float64): one chunk's share of a stats.RAW row."""
    part = numba.carray(pointer(at), 8, np.float64)
    s1, s2, sa, nz, top, bottom = acc
    part[0], part[1], part[2], part[3] = s1, s2, sa, nz
    part[4], part[5], part[6], part[7] = np.float64(top), np.float64(bottom), nan, inf


@numba.njit(inline="always", nogil=True, fastmath=FAST)
def _chunk_pair(x, old, keep, at):
    """The parts of x and of d = x - old (in x's precision, as torch subtracts), in one pass
    over both, a block at a time, at `at` and `at` + 64 bytes. keep: old then holds x, the next
    update's "before", written a block at a time behind the reads (a block whose update is not
    finite is counted for NaN and Inf first, while it still holds the old values)."""
    far = x.dtype.type(np.inf)
    acc = diff = (0.0, 0.0, 0.0, 0, -far, far)
    nan = inf = 0
    for start in range(0, x.shape[0], _BLOCK):
        # Slices indexed from 0: an index from `start` costs a negative-index check per read.
        xs, olds = x[start:start + _BLOCK], old[start:start + _BLOCK]
        if x.itemsize == 4:
            values, block = _narrow_pair(xs, olds)
        else:
            values, block = _wide_pair(xs, olds)
        if not finite(block[0]):
            for i in range(xs.shape[0]):
                d = xs[i] - olds[i]
                nan += np.isnan(d)
                inf += np.isinf(d)
        if keep:
            memcpy(olds.ctypes.data, xs.ctypes.data, xs.shape[0] * x.itemsize)
        acc, diff = _merge(acc, values), _merge(diff, block)
    _part(at + 64, diff, nan, inf)
    x_nan, x_inf = nonfinite(x) if not finite(acc[0]) else (0, 0)
    _part(at, acc, x_nan, x_inf)


@numba.njit(inline="always", nogil=True, fastmath=FAST)
def _chunk(x, at):
    acc = _pass(x)
    nan, inf = nonfinite(x) if not finite(acc[0]) else (0, 0)
    _part(at, acc, nan, inf)


# A job: (address, values, address of its "before" or 0, keep it, address of its parts).
_JOB = 5


@numba.njit(inline="always", nogil=True, fastmath=FAST)
def _work(table):
    """Run jobs until none is left. table (int64, the address of a [jobs + 1, _JOB] array)
    starts with a header row: the next job to claim, the jobs' count, and whether the values
    are float64. Each thread of a team runs this; a job is claimed by one atomic add, so a
    thread that finishes early takes the next, and every thread's last claim finds none."""
    head = numba.carray(pointer(table), _JOB, np.int64)
    jobs = numba.carray(pointer(table), (head[1] + 1, _JOB), np.int64)
    while True:
        j = fetch_add(table, 1) + 1
        if j >= jobs.shape[0]:
            return
        at, n, before, keep, out = jobs[j, 0], jobs[j, 1], jobs[j, 2], jobs[j, 3], jobs[j, 4]
        if head[2]:
            x = numba.carray(pointer(at), n, np.float64)
            if before:
                _chunk_pair(x, numba.carray(pointer(before), n, np.float64), keep, out)
            else:
                _chunk(x, out)
        else:
            y = numba.carray(pointer(at), n, np.float32)
            if before:
                _chunk_pair(y, numba.carray(pointer(before), n, np.float32), keep, out)
            else:
                _chunk(y, out)


def _team_worker(fn):
    """A C callback, worker(void *table), for GOMP_parallel: cached like `jit`."""
    signature = types.void(types.voidptr)
    try:
        return numba.cfunc(signature, nopython=True, cache=True, fastmath=FAST)(fn)
    except RuntimeError:  # no writable cache location
        return numba.cfunc(signature, nopython=True, fastmath=FAST)(fn)


@_team_worker
def _worker(table):
    _work(address_of(table))


# Values a job reads: 128 KB of float32, in 2,048-value blocks. Jobs are cut by size alone and
# their parts merged in order, so the figures never depend on the threads.
_CHUNK = 32_768
# Fewer values run on the calling thread: a pass over 16,384 grads took 4.0 µs alone and 4.6 µs
# on a team of two, over 65,536 12.4 and 7.8 µs (right after a torch op, on 2 cores).
_TEAM_FROM = 2 * _CHUNK


def tensor_stats(weights, grads, before, out, keep=False, threads=None):
    """stats.RAW of tensors given by (address, size) rows, with no copy.

    out holds a row per tensor of `weights`, then of `grads`, then, when `before` is not empty,
    of each weight's update: the weight minus its earlier value in `before` (the weights
    before the optimizer step, one after another, from `gather`). Every tensor is contiguous
    and of before's dtype (float32 or float64). keep: `before` is left holding the weights as
    they are now, the next step's "before" (what `gather` would copy), at no extra pass.

    The pass is cut into jobs of _CHUNK values that torch's OpenMP team shares (omp_team);
    threads: how many of its threads may take part (default: torch's intra-op threads).
    Returns how many took part.
    """
    if not before.flags.c_contiguous:  # read and written by address
        raise ValueError("tensor_stats: `before` must be a contiguous array")
    if threads is None:
        threads = omp_team.threads()
    return _tensor_stats(weights, grads, before, out, keep,
                         omp_team.entry() if threads > 1 else 0, _worker.address, threads)


@jit
def _tensor_stats(weights, grads, before, out, keep, entry, worker, threads):
    rows = np.concatenate((weights, grads))
    first = np.empty(rows.shape[0] + 1, np.int64)  # each tensor's first job
    first[0] = 1  # after the header row
    for t in range(rows.shape[0]):
        first[t + 1] = first[t] + max(1, -(-rows[t, 1] // _CHUNK))
    count = first[-1] - 1
    table = np.zeros((count + 1, _JOB), np.int64)
    table[0, 1] = count
    table[0, 2] = before.itemsize == 8
    parts = np.empty((count + 1, 16))  # a job's part of its tensor's row, then of its update
    size = before.itemsize
    at = before.ctypes.data
    for t in range(rows.shape[0]):
        for j in range(first[t], first[t + 1]):
            start = (j - first[t]) * _CHUNK
            table[j, 0] = rows[t, 0] + start * size
            table[j, 1] = min(_CHUNK, rows[t, 1] - start)
            table[j, 2] = at + start * size if before.shape[0] and t < weights.shape[0] else 0
            table[j, 3] = keep
            table[j, 4] = parts[j].ctypes.data
        at += rows[t, 1] * size if t < weights.shape[0] else 0
    if entry and threads > 1 and rows[:, 1].sum() >= _TEAM_FROM:
        run_team(entry, worker, table.ctypes.data, threads)
    else:  # the same compiled worker: the figures never depend on the threads
        call(worker, table.ctypes.data)
    for t in range(rows.shape[0]):
        updates = before.shape[0] and t < weights.shape[0]
        for half in range(2 if updates else 1):
            row = out[t if half == 0 else rows.shape[0] + t]
            s1 = s2 = sa = nz = nan = inf = 0.0
            top, bottom = -np.inf, np.inf
            for p in parts[first[t]:first[t + 1], 8 * half:8 * half + 8]:
                s1, s2, sa, nz = s1 + p[0], s2 + p[1], sa + p[2], nz + p[3]
                top, bottom = fmax(top, p[4]), fmin(bottom, p[5])
                nan, inf = nan + p[6], inf + p[7]
            store(row, s1, s2, sa, nz, top, bottom, nan, inf, rows[t, 1])
    # Each thread's last claim found no job. Read after the run, the table also stays alive
    # until then: numba frees an array after its last use, and the threads read it by address.
    return table[0, 0] - count


@jit
def unchanged(tensors, before, probes):
    """Whether `probes` values spread evenly over each tensor of (address, size) rows equal
    their copies in `before` (NaN equal to NaN, 0.0 to -0.0), laid out as `gather` copies them,
    first and last values included: a cheap check that the weights were not changed since."""
    at = 0
    for t in range(tensors.shape[0]):
        n = tensors[t, 1]
        x = numba.carray(pointer(tensors[t, 0]), n, before.dtype)
        count = min(probes, n)
        for j in range(count):
            i = j * (n - 1) // max(count - 1, 1)
            v = x[i]
            b = before[at + i]
            if v != b and not (np.isnan(v) and np.isnan(b)):
                return False
        at += n
    return True


@jit
def gather(tensors, out):
    """Copy the contiguous tensors of (address, size) rows `tensors` (of out's dtype) into out,
    one after another."""
    at = out.ctypes.data
    for t in range(tensors.shape[0]):
        count = tensors[t, 1] * out.itemsize
        memcpy(at, tensors[t, 0], count)
        at += count


@jit
def extremes(x, out):
    """out = [min, max, NaN count, Inf count] of the values of x, the batch sentinel's row:
    min and max are NaN when x holds a NaN (as torch.aminmax gives them). One `_raw` pass."""
    raw = np.empty(8)
    _raw(x, raw)
    out[0] = -raw[5]
    out[1] = raw[4]
    out[2] = raw[6]
    out[3] = raw[7]


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
    activation_row(x.reshape(2, 2, 2), np.empty(0, np.int64), 1, -np.inf, np.inf, np.empty(0),
                   np.empty(10))
    feature_profile(x.reshape(2, 2, 2), 1, np.zeros(1, np.int64), np.empty((2, 8)),
                    np.empty((2, 4), np.float32), np.empty((2, 1)))
    feature_profile(x.reshape(2, 4, 1), 1, np.zeros(1, np.int64), np.empty((4, 8)),
                    np.empty((4, 2), np.float32), np.empty((4, 1)))
    sorted_distinct(np.empty((4, 2), np.float32), 10, np.empty((4, 8)))
    reservoir_offer(np.zeros((1, 2)), np.zeros(1, np.int64), np.zeros(1, np.int64),
                    np.empty((1, 1)), np.empty((1, 1), np.int64), 0, np.zeros(1),
                    np.zeros(1, np.int64), np.zeros(8), 0, 0)
    for bits in (np.int64, np.int32):  # float64 and float32 batches' bits
        row_hashes(np.zeros((2, 4), bits), np.ones(4, np.int64), np.zeros(2, np.int64))
    extremes(x, np.empty(4))
