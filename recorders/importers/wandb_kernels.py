"""The bulk decoder of `.wandb` files compiled with numba: a file in two kernel calls.

`joined` checks and joins a file's pieces as `records.read_records` does, in one pass: the
7-byte piece headers, the CRC-32 of each piece's type and data (table-driven, eight bytes a
step), FULL / FIRST, MIDDLE..., LAST, the zero padding of a block's last bytes. It stops at the
first piece that is cut short, damaged or out of place, and says where, as `read_records` does.

`walk` reads every record's fields as `protowalk` does (a record it cannot walk, or of two
kinds, is left to protobuf), then the items of the history rows and summary updates, matched
against the layout the client writes, as `wandb_fast` does: one or two key fields, then
`value_json`, last and once. It emits flat arrays: per history row its record, its
`History.step.num` and whether it must be decoded exactly; per history item its row, its key (an
index into the distinct key fields, told apart by their bytes) and its value's text, copied
end to end for Arrow; per distinct key where the summary updates set it first and last. Python
then makes a few calls in all: protobuf decodes each distinct key once, Arrow parses all values
(as Python's `float` does), and `wandb_fast` does the rest as for its own walk.
"""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

try:
    import numba
except ImportError as exc:  # wandb.compiled_decoder() is None: the numpy one (wandb_fast)
    raise ImportError("numba is not installed (pip install 'tracelab[torch]')") from exc
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from tracelab.recorders.importers import wandb_fast as fast
from tracelab.recorders.importers.protowalk import FIXED32, FIXED64, LEN, VARINT
from tracelab.recorders.importers.records import BLOCK, HEADER, _read_exactly
from tracelab.recorders.importers.tfrecord import Damage
from tracelab.recorders.importers.wandb_fast import CONFIG, EXACT, EXIT, HISTORY, RUN, SUMMARY

# Why `joined` stopped, as records.read_records words it (0: it did not).
REASONS = ("", "the file ends inside a record's header", "a damaged record header",
           "the file ends inside a record", "a checksum mismatch",
           "a record cut off by the next", "a record piece without its start")
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_MASK61 = (1 << 61) - 1


def _jit(fn):
    """njit, cached on disk where the package's folder (or numba's cache folder) is writable."""
    try:
        return numba.njit(nogil=True, cache=True)(fn)
    except RuntimeError:  # no writable cache location: compile in each process instead
        return numba.njit(nogil=True)(fn)


_inline = numba.njit(inline="always", nogil=True)


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
    damage = Damage(n, where, REASONS[status], size - where) if status else None
    return buf, starts[:n], ends[:n], damage


@_inline
def _varint(buf, p):
    """The varint at p: (its value, as int64; where it ends; whether it is 10 bytes at most)."""
    value = np.int64(0)
    for k in range(10):
        byte = np.int64(buf[p + k])
        value |= (byte & 0x7F) << (7 * k)
        if byte < 0x80:
            return value, p + k + 1, True
    return value, p + 10, False


@_inline
def _length(buf, p):
    """A length at p: (it, where it ends, whether it is a varint below 2**31)."""
    size, end, ok = _varint(buf, p)
    return size, end, ok and 0 <= size < 1 << 31


@_inline
def _field(buf, p, limit):
    """The field at p of a message that ends at `limit`, as protowalk reads it: (number, wire
    type, where its data starts, where it ends, its varint value, whether it is well formed)."""
    tag, q, ok = _varint(buf, p)
    number = (tag >> 3) & _MASK61
    wire = tag & 7
    start, end, value = q, q, np.int64(0)
    if not ok or number == 0 or number >= 1 << 29:
        return number, wire, start, end, value, False
    if wire == VARINT:
        value, end, ok = _varint(buf, q)
    elif wire == LEN:
        size, start, ok = _length(buf, q)
        end = start + size
    elif wire == FIXED64 or wire == FIXED32:
        end = q + (8 if wire == FIXED64 else 4)
    else:
        ok = False
    return number, wire, start, end, value, ok and end <= limit


@_inline
def _item(buf, s, e):
    """An Item `buf[s:e]` in the client's layout (one or two key fields, then value_json, last
    and once): (where the key fields end, where the value starts, whether it has that layout).
    `buf` carries zero bytes past its last record, so reading a little past `e` is safe."""
    q, keys = s, 0
    while keys < 2 and q < e and (buf[q] == 0x0A or buf[q] == 0x12):
        size, after, ok = _length(buf, q + 1)
        if not ok or after + size >= e:
            break
        q, keys = after + size, keys + 1
    if keys == 0 or buf[q] != 0x82 or buf[q + 1] != 0x01:
        return q, e, False
    size, vstart, ok = _length(buf, q + 2)
    return q, vstart, ok and vstart + size == e


@_inline
def _step(buf, s, e):
    """(History.step.num, whether the Step message `buf[s:e]` holds it once at most, as a
    varint, and walks)."""
    num, count, fine, p = np.int64(0), 0, True, s
    while p < e:
        number, wire, _, end, value, ok = _field(buf, p, e)
        if not ok:
            return num, False
        if number == 1:
            fine = fine and wire == VARINT
            count += 1
            num = value
        p = end
    return num, fine and count <= 1


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


@_inline
def _copy(buf, a, b, out, w):
    """out[w:w + b - a] = buf[a:b], eight bytes a step (`out` has 8 bytes to spare)."""
    while a < b:
        _put(out, w, _word(buf, a))
        a += 8
        w += 8


@_inline
def _ascii(buf, a, b):
    """Whether buf[a:b] is ASCII, eight bytes a step."""
    high = np.int64(0)
    while a + 8 <= b:
        high |= _word(buf, a)
        a += 8
    if a < b:
        high |= _word(buf, a) & ((np.int64(1) << (8 * (b - a))) - 1)
    return (high & np.int64(-0x7F7F7F7F7F7F7F80)) == 0


@_inline
def _hash(buf, a, n):
    """A hash of buf[a:a + n]: its words, the last one read where the bytes end (overlapping
    the one before it); a short span's word masked to its bytes."""
    if n < 8:
        return _mixed((_word(buf, a) & ((np.int64(1) << (8 * n)) - 1)) ^ n)
    h = (_word(buf, a + n - 8) ^ n) * _K1
    p = a
    while p < a + n - 8:
        h = (h ^ _word(buf, p)) * _K2
        p += 8
    return _mixed(h)


@_inline
def _mixed(h):
    """MurmurHash3's finalizer: every bit of h moves the low bits, which pick the slot."""
    h = (h ^ ((h >> 33) & 0x7FFFFFFF)) * _K3
    h = (h ^ ((h >> 33) & 0x7FFFFFFF)) * _K4
    return h ^ ((h >> 33) & 0x7FFFFFFF)


@_inline
def _same(buf, a, b, n):
    """Whether buf[a:a + n] == buf[b:b + n]."""
    if n < 8:
        return ((_word(buf, a) ^ _word(buf, b)) & ((np.int64(1) << (8 * n)) - 1)) == 0
    k = 0
    while k < n - 8:
        if _word(buf, a + k) != _word(buf, b + k):
            return False
        k += 8
    return _word(buf, a + n - 8) == _word(buf, b + n - 8)


_K1, _K2 = np.int64(-7046029254386353131), np.int64(-4417276706812531889)
_K3, _K4 = np.int64(-49064778989728563), np.int64(-4265267296055464877)


# Columns of `walk`'s table of distinct key fields: where they are, how long, their hash; the
# summary items that set them first and last (their places among the summary's items; -1: none),
# and where that last one lies.
_AT, _SIZE, _HASH, _FIRST_SET, _LAST_SET, _LAST_START, _LAST_END = range(7)


@_inline
def _intern(buf, s, n, keys, count, table):
    """The index of the key fields `buf[s:s+n]` in `keys` (added, at `count`, if new): open
    addressing in `table` (which is never full: the walk stops when it is half full)."""
    h = _hash(buf, s, n)
    mask = table.shape[0] - 1
    slot = h & mask
    while True:
        at = table[slot]
        if at < 0:
            keys[count, _AT], keys[count, _SIZE], keys[count, _HASH] = s, n, h
            keys[count, _FIRST_SET] = -1
            table[slot] = count
            return count
        if keys[at, _HASH] == h and keys[at, _SIZE] == n and _same(buf, keys[at, _AT], s, n):
            return at
        slot = (slot + 1) & mask


@_jit
def _kinds(buf, starts, ends):
    """wandb_fast.record_kinds: each record's kind, and where that field's data lies."""
    n = starts.shape[0]
    kinds = np.zeros(n, dtype=np.int64)
    ks, ke = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    for r in range(n):
        p, limit = starts[r], ends[r]
        kind, found, bad = 0, 0, False
        while p < limit:
            number, wire, s, e, _, ok = _field(buf, p, limit)
            if not ok:
                bad = True
                break
            bad = bad or (number == 1 and wire != VARINT)  # Record.num
            if (number == HISTORY or number == SUMMARY or number == CONFIG or number == RUN
                    or number == EXIT):
                found += 1
                kind, ks[r], ke[r] = number, s, e
                bad = bad or wire != LEN
            p = e
        kinds[r] = EXACT if bad or found > 1 else kind
    return kinds, ks, ke


TABLE = 1 << 16  # slots of the walk's first table of distinct keys (a power of two)


@_jit
def _walk(buf, kinds, ks, ke, table, row_rec, row_step, row_exact, row_has, item_row,
          item_key, offsets, values, keys, odd):
    """The items of the history rows and summary updates (the records of kind HISTORY and
    SUMMARY, whose message is `buf[ks[r]:ke[r]]`), in file order, into the arrays given
    (`_outputs`: allocated by numpy, whose large arrays take huge pages, where a page fault per
    4 KiB of numba's would cost a tenth of the walk). Returns (history items, their values'
    bytes, distinct keys, non-ASCII summary values, whether the summary updates were all in
    the client's layout); distinct keys -1 where more than half the `table` was needed."""
    table[:] = -1
    row_step[:] = 0  # (from an earlier try, where the table was full)
    offsets[0] = 0
    j = k = w = count = m = n_odd = 0
    summary_ok = True
    for r in range(kinds.shape[0]):
        hist = kinds[r] == HISTORY
        if not hist and kinds[r] != SUMMARY:
            continue
        p, limit = ks[r], ke[r]
        exact, steps = False, 0
        while p < limit:
            number, wire, s, e, _, ok = _field(buf, p, limit)
            if not ok:
                exact = True
                break
            if number == 2 and wire == LEN and hist:  # History.step
                steps += 1
                row_step[j], fine = _step(buf, s, e)
                exact = exact or not fine
            elif (number == 1 or number == 2) and (wire != LEN or number == 2):
                exact = True  # not an item, or a summary removal
            elif number == 1:
                key_end, vstart, ok = _item(buf, s, e)
                if not ok:
                    exact = True
                    p = e
                    continue
                key = _intern(buf, s, key_end - s, keys, count, table)
                if key == count:
                    count += 1
                    if 2 * count > table.shape[0]:  # full: the caller starts again, larger
                        return k, w, -1, n_odd, False
                if hist:
                    item_row[k], item_key[k] = j, key
                    _copy(buf, vstart, e, values, w)
                    w += e - vstart
                    k += 1
                    offsets[k] = w
                else:
                    if keys[key, _FIRST_SET] < 0:
                        keys[key, _FIRST_SET] = m
                    keys[key, _LAST_SET], keys[key, _LAST_START], keys[key, _LAST_END] = m, s, e
                    m += 1
                    if not _ascii(buf, vstart, e):  # UTF-8 is checked by the caller
                        odd[n_odd, 0], odd[n_odd, 1] = vstart, e
                        n_odd += 1
            p = e
        if hist:
            row_rec[j], row_has[j] = r, steps > 0
            row_exact[j] = exact or steps > 1
            j += 1
        else:
            summary_ok = summary_ok and not exact
    return k, w, count, n_odd, summary_ok


def _outputs(kinds: np.ndarray, ks: np.ndarray, ke: np.ndarray) -> tuple:
    """The arrays `_walk` fills, for the records of these kinds: per history row (record,
    step, exact, has a step), per history item (row, key), the values' offsets and bytes, the
    distinct keys (`_AT`... columns), the non-ASCII summary values' spans."""
    rows = int(np.count_nonzero(kinds == HISTORY))
    span = int((ke - ks)[(kinds == HISTORY) | (kinds == SUMMARY)].sum())
    bound = span // 7 + 1  # an item field in the client's layout takes 7 bytes at least
    return (np.empty(rows, dtype=np.int64), np.zeros(rows, dtype=np.int64),
            np.zeros(rows, dtype=bool), np.zeros(rows, dtype=bool),
            np.empty(bound, dtype=np.int32), np.empty(bound, dtype=np.int32),
            np.empty(bound + 1, dtype=np.int64), np.empty(span + 8, dtype=np.uint8),
            np.empty((bound, 7), dtype=np.int64), np.empty((bound, 2), dtype=np.int64))


def decode(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, item_class):
    """The records `buf[starts[i]:ends[i]]` (`buf`: from `joined`) as wandb_fast reads them:
    (each record's kind, the history rows as `wandb_fast.History`, the summary or None)."""
    kinds, ks, ke = _kinds(buf, starts, ends)
    out = _outputs(kinds, ks, ke)
    size, count = TABLE, -1
    while count < 0:  # more keys than the table holds (a new key every step): again, larger
        k, w, count, n_odd, summary_ok = _walk(buf, kinds, ks, ke,
                                               np.empty(size, dtype=np.int64), *out)
        size *= 8
    row_rec, step, exact, has_step, item_row, item_key, offsets, values, keys, odd = out
    item_row, item_key, offsets, values = item_row[:k], item_key[:k], offsets[:k + 1], values[:w]
    keys, odd = keys[:count], odd[:n_odd]
    decoded = [fast.item_of(buf[a:a + n], item_class) for a, n in keys[:, :2].tolist()]
    text = pa.Array.from_buffers(pa.large_string(), len(item_row),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(values)])
    value, numeric = fast.numbers(text)
    rows = fast.history(values, exact, step, has_step, item_row, item_key, decoded,
                        offsets[:-1], offsets[1:], value, numeric)
    summary = None
    if summary_ok and not (kinds == EXACT).any() and fast.utf8(buf, odd[:, 0], odd[:, 1]):
        used = np.flatnonzero(keys[:, _FIRST_SET] >= 0)
        used = used[np.argsort(keys[used, _FIRST_SET])]
        summary = fast.final_summary(buf, used, keys[used, _LAST_SET], keys[used, _LAST_START],
                                     keys[used, _LAST_END], decoded, item_class)
    return kinds, rows, summary


def warm_up() -> None:
    """Load the kernels from numba's disk cache (or compile them: seconds) on a tiny file, once
    per process, not inside a loop over runs."""
    item = b"\x0a\x03\x12\x01a\x82\x01\x011"  # History.item {nested_key: "a", value_json: "1"}
    record = b"\x12" + bytes([len(item) + 2, 0x0A, len(item)]) + item
    body = bytes([1]) + record
    import zlib
    crc = zlib.crc32(body).to_bytes(4, "little")
    data = HEADER + crc + len(record).to_bytes(2, "little") + bytes([1]) + record
    buf = np.frombuffer(data + bytes(fast.PAD), dtype=np.uint8).copy()
    bound = len(data) // 7 + 1
    starts, ends = np.empty(bound, dtype=np.int64), np.empty(bound, dtype=np.int64)
    n, _, _ = _joined(buf, len(data), len(HEADER), _CRC, starts, ends)
    starts, ends = starts[:n], ends[:n]
    kinds = _kinds(buf, starts, ends)
    for size in (TABLE, 1):  # the table full at once, too
        _walk(buf, *kinds, np.empty(size, dtype=np.int64), *_outputs(*kinds))
