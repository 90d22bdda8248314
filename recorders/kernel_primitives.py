"""Building blocks of the recorder's compiled kernels (numba): the compile options, raw pointers
and memcpy, float max and min that vectorize, an optimizer barrier for finiteness tests, the
running aggregates and row layout (stats.RAW) that every kernel shares, and the atomic add and
call that spread a kernel's work over torch's OpenMP team (omp_team)."""
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
# min (fmax, fmin) assume no NaN, and their callers count NaN before they trust them.
FAST = {"reassoc", "nsz", "contract"}


def jit(fn):
    """njit, cached on disk where the package's folder (or numba's cache folder) is writable."""
    try:
        return numba.njit(nogil=True, cache=True, fastmath=FAST)(fn)
    except RuntimeError:  # no writable cache location: compile in each process instead
        return numba.njit(nogil=True, fastmath=FAST)(fn)


@intrinsic
def pointer(typingctx, address):
    """An int64 address as a raw pointer, for numba.carray."""
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)
    return types.voidptr(types.int64), codegen


def float_extreme(name):
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


fmax = float_extreme("maxnum")
fmin = float_extreme("minnum")


# The register class of a float in inline assembly: SSE/AVX on x86-64, FP/SIMD on AArch64.
FLOAT_REGISTER = {"x86_64": "x", "amd64": "x", "aarch64": "w", "arm64": "w"}.get(
    platform.machine().lower())


@intrinsic
def opaque(typingctx, x):
    """x, through an empty inline-assembly barrier that the optimizer cannot see into (on
    other architectures x itself; the randomized NaN/Inf tests then guard the kernels)."""
    def codegen(context, builder, signature, args):
        if FLOAT_REGISTER is None:
            return args[0]
        kind = args[0].type
        return builder.asm(ir.FunctionType(kind, [kind]), "", f"={FLOAT_REGISTER},0",
                           [args[0]], side_effect=False)
    return x(x), codegen


@numba.njit(inline="always", nogil=True)
def finite(total):
    """Whether a sum taken under FAST is finite. LLVM has folded np.isfinite of such a sum to
    True (a block's float64 sum under reassoc and nsz, in a nested loop), so the test reads
    the value through opaque."""
    return np.isfinite(opaque(total))


@numba.njit(inline="always", nogil=True, fastmath=FAST)
def add(acc, v, w, r):
    """The running (sum, sum of squares, sum of |w|, nonzero, max, min) with one more value:
    w (float64) to the sums, v to the nonzero count, r to the range."""
    s1, s2, sa, nz, top, bottom = acc
    return s1 + w, s2 + w * w, sa + abs(w), nz + (v != 0), fmax(top, r), fmin(bottom, r)


@jit
def nonfinite(x):
    """(NaN count, Inf count) of x."""
    nan = 0
    inf = 0
    for i in range(x.shape[0]):
        nan += np.isnan(x[i])
        inf += np.isinf(x[i])
    return nan, inf


@numba.njit(inline="always", nogil=True)
def store(out, s1, s2, sa, nz, top, bottom, nan, inf, n):
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


@intrinsic
def memcpy(typingctx, destination, source, count):
    """memcpy(destination, source, count bytes) of int64 addresses."""
    def codegen(context, builder, signature, args):
        dst, src = (builder.inttoptr(a, cgutils.voidptr_t) for a in args[:2])
        cgutils.raw_memcpy(builder, dst, src, args[2], 1)
        return context.get_dummy_value()
    return types.void(types.int64, types.int64, types.int64), codegen


@intrinsic
def address_of(typingctx, p):
    """A raw pointer as an int64 address."""
    def codegen(context, builder, signature, args):
        return builder.ptrtoint(args[0], ir.IntType(64))
    return types.int64(types.voidptr), codegen


@intrinsic
def fetch_add(typingctx, address, value):
    """Atomically add value to the int64 at address; returns what it held before."""
    def codegen(context, builder, signature, args):
        target = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        return builder.atomic_rmw("add", target, args[1], "monotonic")
    return types.int64(types.int64, types.int64), codegen


@intrinsic
def call(typingctx, fn, data):
    """fn(data) through the address of a C function void fn(void *)."""
    def codegen(context, builder, signature, args):
        void_p = cgutils.voidptr_t
        kind = ir.FunctionType(ir.VoidType(), [void_p]).as_pointer()
        builder.call(builder.inttoptr(args[0], kind), [builder.inttoptr(args[1], void_p)])
        return context.get_dummy_value()
    return types.void(types.int64, types.int64), codegen


@intrinsic
def run_team(typingctx, entry, worker, data, threads):
    """GOMP_parallel(worker, data, threads, 0) through its address `entry`: worker(data) runs
    on each of `threads` threads of the calling thread's OpenMP team, this one included, and
    returns when all are done."""
    def codegen(context, builder, signature, args):
        void_p = cgutils.voidptr_t
        work = ir.FunctionType(ir.VoidType(), [void_p]).as_pointer()
        gomp = ir.FunctionType(ir.VoidType(), [work, void_p, ir.IntType(32), ir.IntType(32)])
        builder.call(builder.inttoptr(args[0], gomp.as_pointer()),
                     [builder.inttoptr(args[1], work), builder.inttoptr(args[2], void_p),
                      builder.trunc(args[3], ir.IntType(32)), ir.Constant(ir.IntType(32), 0)])
        return context.get_dummy_value()
    return types.void(types.int64, types.int64, types.int64, types.int64), codegen
