"""The framing of `.wandb` files compiled with numba: a file's pieces checked and joined in one
pass, as `records.read_records` reads them: the 7-byte piece headers, the CRC-32 of each piece's
type and data (table-driven, sixteen bytes a step), FULL / FIRST, MIDDLE..., LAST, the zero
padding of a block's last bytes. It stops at the first piece that is cut short, damaged or out
of place, and says where, as `read_records` does. Here too what `wandb_kernels` shares: numba's
set-up, and 8-byte loads and stores at any offset.
"""
from __future__ import annotations

import os

import numpy as np

try:
    import numba
except ImportError as exc:  # wandb.compiled_decoder() is None: the numpy one (wandb_fast)
    raise ImportError("numba is not installed (pip install 'tracelab[torch]')") from exc
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from tracelab.recorders.importers.records import (BLOCK, HEADER, REASONS, _read_exactly,
                                                  joined_exactly, resumable)
from tracelab.recorders.importers.tfrecord import Damage

_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _jit(fn):
    """njit, cached on disk where the package's folder (or numba's cache folder) is writable."""
    try:
        return numba.njit(nogil=True, cache=True)(fn)
    except RuntimeError:  # no writable cache location: compile in each process instead
        return numba.njit(nogil=True)(fn)


_inline = numba.njit(inline="always", nogil=True)



@intrinsic
def _word(typingctx, buf, p):
    """The 8 bytes at `buf[p:p + 8]`, little-endian, as int64 (one unaligned load)."""
    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        word = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(word, align=1)
    return types.int64(buf, types.int64), codegen


@intrinsic
def _put(typingctx, out, p, word):
    """Store the int64 `word` at `out[p:p + 8]`, little-endian (one unaligned store)."""
    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        at = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(64).as_pointer())
        builder.store(args[2], at, align=1)
        return context.get_dummy_value()
    return types.none(out, types.int64, types.int64), codegen



def _crc_tables() -> np.ndarray:
    """Slicing-by-16 tables of zlib's CRC-32 (reflected polynomial 0xEDB88320), end to end:
    table k, for the byte k places before the end of a 16-byte step, at k * 256."""
    table = np.zeros((16, 256), dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0xEDB88320 if c & 1 else 0)
        table[0, i] = c
    for k in range(1, 16):
        table[k] = (table[k - 1] >> 8) ^ table[0][table[k - 1] & 0xFF]
    return table.reshape(-1)


_CRC = _crc_tables()
_BYTE = np.uint64(0xFF)


@_inline
def _crc32(data, a, b, kind, t):
    """zlib.crc32(data[a:b], zlib.crc32(bytes([kind]))), 16 bytes a step (unsigned indices:
    no negative-index fix-up per table lookup)."""
    c = np.uint64(t[np.uint64(0xFF ^ kind)] ^ 0xFFFFFF)
    while a + 16 <= b:
        low = np.uint64(_word(data, a)) ^ c
        high = np.uint64(_word(data, a + 8))
        c = np.uint64(0)
        for k in range(8):
            c ^= np.uint64(t[np.uint64((15 - k) * 256) + ((low >> np.uint64(8 * k)) & _BYTE)])
            c ^= np.uint64(t[np.uint64((7 - k) * 256) + ((high >> np.uint64(8 * k)) & _BYTE)])
        a += 16
    while a < b:
        c = np.uint64(t[(c ^ np.uint64(data[a])) & _BYTE]) ^ (c >> np.uint64(8))
        a += 1
    return np.int64(c ^ np.uint64(0xFFFFFFFF))


@_jit
def _joined(data, size, begin, t, starts, ends):
    """records.read_records over `data[:size]` (its header checked), in place: a record that
    fits in its block stays where it is; the pieces of one split across blocks are moved back
    over the headers between them, so that its data ends up in one span. Each record's span
    goes into `starts`/`ends`. Returns (records, why it stopped: an index into REASONS, where
    the damage starts)."""
    n = at = w = 0  # at, w: where the split record being joined starts, and ends so far
    pending = False
    offset = start = begin  # start: where the record being assembled began
    status = 0
    while offset < size:
        left = BLOCK - offset % BLOCK
        if left < 7:  # the block's padding
            offset += left
            continue
        if size - offset < 7:
            status = 1
            break
        crc = (np.int64(data[offset]) | np.int64(data[offset + 1]) << 8
               | np.int64(data[offset + 2]) << 16 | np.int64(data[offset + 3]) << 24)
        length = np.int64(data[offset + 4]) | np.int64(data[offset + 5]) << 8
        kind = np.int64(data[offset + 6])
        if kind == 0 and length == 0 and crc == 0:  # zeros: padding, or preallocated space
            offset += left
            continue
        body, body_end = offset + 7, offset + 7 + length
        if length > left - 7 or kind < _FULL or kind > _LAST:
            status = 2
            break
        if body_end > size:
            status = 3
            break
        if _crc32(data, body, body_end, kind, t) != crc:
            status = 4
            break
        if kind == _FULL or kind == _FIRST:
            if pending:
                status = 5
                break
            start, at, w = offset, body, body_end
        elif not pending:
            status, start = 6, offset
            break
        else:  # the next piece of a split record: its data moved back, next to the last's
            for i in range(length):
                data[w + i] = data[body + i]
            w += length
        pending = kind == _FIRST or kind == _MIDDLE
        if not pending:
            starts[n], ends[n] = at, w
            n += 1
        offset = body_end
        if not pending:
            start = offset
    if status == 0 and pending:
        status = 3
    return n, status, start


def joined(path, pad: int):
    """records.read_joined for a `.wandb` file: (its bytes as uint8, the pieces of records
    split across blocks joined in place, followed by `pad` zero bytes; where each record
    starts and ends in them; the damage or None)."""
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        buf = np.empty(size + pad, dtype=np.uint8)
        size = file.readinto(memoryview(buf)[:size])  # what is there, should it shrink
    buf[size:] = 0
    if bytes(buf[:len(HEADER)]) != HEADER:  # no records: read_records says why
        empty = np.zeros(0, dtype=np.int64)
        return buf, empty, empty, _read_exactly(bytes(buf[:size]))[1]
    bound = size // 7 + 1
    starts, ends = np.empty(bound, dtype=np.int64), np.empty(bound, dtype=np.int64)
    n, status, where = _joined(buf, size, len(HEADER), _CRC, starts, ends)
    if status and resumable(REASONS[status]):
        # Damage the reading goes on past: the record-by-record reader, on the file's bytes as
        # they were (the pass above moved split records' pieces in place).
        with open(path, "rb") as file:
            data, starts, ends, damage = joined_exactly(file.read(size), pad)
        return np.frombuffer(bytearray(data), dtype=np.uint8), starts, ends, damage
    damage = Damage(n, where, REASONS[status], size - where) if status else None
    return buf, starts[:n], ends[:n], damage
