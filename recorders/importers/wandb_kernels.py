"""The bulk decoder of `.wandb` files compiled with numba: a file in two kernel calls.

`joined` (wandb_frames.py) checks the framing and joins the pieces of records split across
blocks, in place. `_walk` reads every record's fields as `protowalk` does (a record it cannot
walk, or of two kinds, is left to protobuf), then the items of the history rows and summary
updates, matched against the layout the client writes, as `wandb_fast` does: one or two key
fields, then `value_json`, last and once. It emits flat arrays: per history row its record,
its `History.step.num` and whether it must be decoded exactly; per history item its row, its
key (an index into the distinct key fields, told apart by their bytes) and its value's text,
copied end to end for Arrow; per distinct key where the summary updates set it first and last.
Python then makes a few calls in all: protobuf decodes each distinct key once, Arrow parses all
values (as Python's `float` does), and `wandb_fast` does the rest as for its own walk.
"""
from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa

from tracelab.recorders.importers import wandb_fast as fast
from tracelab.recorders.importers.protowalk import FIXED32, FIXED64, LEN, VARINT
from tracelab.recorders.importers.records import HEADER
from tracelab.recorders.importers.wandb_fast import CONFIG, EXACT, EXIT, HISTORY, RUN, SUMMARY
from tracelab.recorders.importers.wandb_frames import (_CRC, _inline, _jit, _joined, _put,
                                                       _word, joined)

__all__ = ["decode", "joined", "warm_up"]
_MASK61 = (1 << 61) - 1


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


def _outputs(kinds: np.ndarray, ks: np.ndarray, ke: np.ndarray, size: int) -> tuple:
    """The arrays `_walk` fills, for the records of these kinds and a table of `size` slots:
    the table, per history row (record, step, exact, has a step), per history item (row, key),
    the values' offsets and bytes, the distinct keys (`_AT`... columns: at most half the
    table's size, and one more), the non-ASCII summary values' spans."""
    rows = int(np.count_nonzero(kinds == HISTORY))
    span = int((ke - ks)[(kinds == HISTORY) | (kinds == SUMMARY)].sum())
    bound = span // 7 + 1  # an item field in the client's layout takes 7 bytes at least
    return (np.empty(size, dtype=np.int64), np.empty(rows, dtype=np.int64),
            np.zeros(rows, dtype=np.int64), np.zeros(rows, dtype=bool),
            np.zeros(rows, dtype=bool), np.empty(bound, dtype=np.int32),
            np.empty(bound, dtype=np.int32), np.empty(bound + 1, dtype=np.int64),
            np.empty(span + 8, dtype=np.uint8), np.empty((size // 2 + 1, 7), dtype=np.int64),
            np.empty((bound, 2), dtype=np.int64))


def decode(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, item_class):
    """The records `buf[starts[i]:ends[i]]` (`buf`: from `joined`) as wandb_fast reads them:
    (each record's kind, the history rows as `wandb_fast.History`, the summary or None)."""
    kinds, ks, ke = _kinds(buf, starts, ends)
    size, count = TABLE, -1
    while count < 0:  # more keys than the table holds (a new key every step): again, larger
        out = _outputs(kinds, ks, ke, size)
        k, w, count, n_odd, summary_ok = _walk(buf, kinds, ks, ke, *out)
        size *= 8
    _, row_rec, step, exact, has_step, item_row, item_key, offsets, values, keys, odd = out
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
    crc = zlib.crc32(bytes([1]) + record).to_bytes(4, "little")  # a FULL piece
    data = HEADER + crc + len(record).to_bytes(2, "little") + bytes([1]) + record
    buf = np.frombuffer(data + bytes(fast.PAD), dtype=np.uint8).copy()
    bound = len(data) // 7 + 1
    starts, ends = np.empty(bound, dtype=np.int64), np.empty(bound, dtype=np.int64)
    n, _, _ = _joined(buf, len(data), len(HEADER), _CRC, starts, ends)
    starts, ends = starts[:n], ends[:n]
    kinds = _kinds(buf, starts, ends)
    for size in (TABLE, 1):  # the table full at once, too
        _walk(buf, *kinds, *_outputs(*kinds, size))
