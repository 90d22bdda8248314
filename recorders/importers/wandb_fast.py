"""The history rows and the summary of a `.wandb` file, decoded without a Python object per item.

W&B writes a history record per logged row (an item per key: `nested_key`, `value_json`) and,
after each, a summary update that repeats the row. `protowalk` walks all records' wire format
together; here the items are matched against the layout the client writes, one key field then
the value (`key`/`nested_key`, then `value_json`), their keys told apart by their bytes (each
distinct key is decoded once, by protobuf), and their values parsed together by Arrow (whose
reading of a number is Python's; what Arrow does not read is parsed by `float`, as before).

Whatever this cannot prove it decoded as the protobuf decoder would is left to that decoder: a
history record with another layout (a logged dict, whose items have several `nested_key`s;
`integer`/`number` values; a field twice) is decoded exactly, in its place; the summary is
decoded exactly unless every summary update matches (no removals, no damaged record).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracelab.recorders.importers.protowalk import LEN, VARINT, Fields, fields
from tracelab.recorders.importers.wandb_proto import BOOKKEEPING

HISTORY, SUMMARY, CONFIG, RUN, EXIT = 2, 3, 5, 17, 18  # Record's fields (wandb_internal.proto)
EXACT = -1  # a record to decode exactly
_KINDS = (HISTORY, SUMMARY, CONFIG, RUN, EXIT)
_KEY_TAGS = (0x0A, 0x12)      # Item.key, Item.nested_key: field 1 or 2, LEN
_VALUE_TAG = (0x82, 0x01)     # Item.value_json: field 16, LEN
_IS_KEY_TAG = np.isin(np.arange(256), _KEY_TAGS)
PAD = 272  # zero bytes the buffer of `decode` must carry past its end (protowalk's, and more)
_JSON_NUMBER = r"^(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?|NaN|-?Infinity)$"


def record_kinds(top: Fields, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each record's kind (a Record field of _KINDS; 0 for other records, EXACT where the walk
    cannot tell: a damaged record, two kinds at once), and where that field's data lies."""
    at = np.flatnonzero(np.isin(top.number, _KINDS))
    msg = top.msg[at]
    kinds = np.zeros(n, dtype=np.int64)
    kinds[msg] = top.number[at]
    start = np.zeros(n, dtype=np.int64)
    end = np.zeros(n, dtype=np.int64)
    start[msg], end[msg] = top.start[at], top.end[at]
    kinds[np.bincount(msg, minlength=n) > 1] = EXACT
    kinds[msg[top.wire[at] != LEN]] = EXACT
    kinds[top.msg[(top.number == 1) & (top.wire != VARINT)]] = EXACT  # Record.num
    kinds[top.bad] = EXACT
    return kinds, start, end


def _short_varints(buf: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Varints of one or two bytes at `p`: (values, sizes, whether they are that short)."""
    b0 = buf[p].astype(np.int64)
    b1 = buf[p + 1].astype(np.int64)
    two = b0 >= 0x80
    return np.where(two, (b0 & 0x7F) | (b1 << 7), b0), 1 + two, ~two | (b1 < 0x80)


def item_layout(buf: np.ndarray, start: np.ndarray, end: np.ndarray):
    """Items laid out as W&B writes them: key fields (`key`, `nested_key`: one, or two), then
    `value_json`, last and once. Returns (where the key fields end, where the value starts,
    whether the item has that layout); the value ends where the item does."""
    tag, size = buf[start], buf[start + 1]
    key_end = start + 2 + size  # at most 257 bytes on: inside the buffer's PAD
    vsize = buf[key_end + 2]
    vstart = key_end + 3
    ok = (_IS_KEY_TAG[tag] & ((size | vsize) < 0x80) & (buf[key_end] == _VALUE_TAG[0])
          & (buf[key_end + 1] == _VALUE_TAG[1]) & (vstart + vsize == end))
    if not ok.all():  # one or two keys, lengths of one or two bytes, for the others
        at = np.flatnonzero(~ok)
        key_end[at], vstart[at], ok[at] = _general_layout(buf, start[at], end[at])
        wrong = np.flatnonzero(~ok)  # empty spans, so that spans stay in order
        key_end[wrong], vstart[wrong] = start[wrong], end[wrong]
    return key_end, vstart, ok


def _general_layout(buf: np.ndarray, start: np.ndarray, end: np.ndarray):
    q = start.copy()
    nkeys = np.zeros(len(start), dtype=np.int64)
    for _ in range(2):
        tag = buf[q]
        size, skip, short = _short_varints(buf, q + 1)
        after = q + 1 + skip + size
        key = ((tag == _KEY_TAGS[0]) | (tag == _KEY_TAGS[1])) & short & (after < end)
        q = np.where(key, after, q)
        nkeys += key
    size, skip, short = _short_varints(buf, q + 2)
    vstart = q + 2 + skip
    ok = ((nkeys > 0) & (buf[q] == _VALUE_TAG[0]) & (buf[q + 1] == _VALUE_TAG[1]) & short
          & (vstart + size == end))
    return q, vstart, ok


def texts(data: bytes, start: np.ndarray, end: np.ndarray, kind=pa.large_string()) -> pa.Array:
    """The spans `data[start[i]:end[i]]` (in order, not overlapping) as an Arrow array, sliced
    out of `data` without a Python object per span."""
    n = len(start)
    if not n:
        return pa.array([], kind)
    bounds = np.empty(2 * n, dtype=np.int64)
    bounds[0::2], bounds[1::2] = start, end
    if (start[1:] < end[:-1]).any() or (end < start).any():  # unordered: one by one
        return pa.array([data[a:b] for a, b in zip(start, end)], pa.large_binary()).view(kind)
    spans = pa.Array.from_buffers(kind, 2 * n - 1,
                                  [None, pa.py_buffer(bounds), pa.py_buffer(data)])
    return spans.take(pa.array(np.arange(0, 2 * n - 1, 2)))


def numbers(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Values that are numbers as `float` reads them: (the numbers, which are). What Arrow
    parses, it parses as Python does (correctly rounded); the rest is left to the caller."""
    try:
        return (pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False),
                np.ones(len(values), dtype=bool))
    except pa.ArrowInvalid:
        pass
    plain = pc.match_substring_regex(values, _JSON_NUMBER).fill_null(False).to_numpy(
        zero_copy_only=False)
    out = np.full(len(values), np.nan)
    out[plain] = pc.cast(values.filter(pa.array(plain)), pa.float64()).to_numpy(
        zero_copy_only=False)
    return out, plain


@dataclass
class History:
    """History records decoded in bulk (index j: the j-th history record of the file)."""
    exact: np.ndarray       # records to decode exactly instead
    step: np.ndarray        # `_step` where it was logged (`logged_step`)
    logged_step: np.ndarray
    step_field: np.ndarray  # History.step.num, where there is one (`has_step_field`)
    has_step_field: np.ndarray
    wall: np.ndarray        # `_timestamp`, or NaN
    rec: np.ndarray         # per value: its record (sorted)
    key: np.ndarray         # its key, an index into `keys`
    value: np.ndarray
    keys: list
    others: list = field(default_factory=list)  # (record, key, text): dicts


@dataclass
class _Items:
    """The items of history rows and summary updates, walked together (history items first)."""
    msg: np.ndarray
    start: np.ndarray
    vstart: np.ndarray
    end: np.ndarray
    ok: np.ndarray
    ident: np.ndarray   # per item: its key fields' bytes, as an index into `decoded`
    decoded: list       # per distinct key fields: the Item protobuf reads from them, or None
    value: np.ndarray   # per item: its value, where `numbers` read it as a number
    numeric: np.ndarray


def decode(buf: np.ndarray, data: bytes, start: np.ndarray, end: np.ndarray,
           summary_mask: np.ndarray, item_class, summary: bool = True):
    """History rows (`History`) and the summary the updates leave (`{key: Item}`, or None
    where not proven: decode the updates exactly then) from the History and Update messages
    `buf[start[i]:end[i]]` (in file order; `summary_mask`: which are updates). `buf` is
    `data` (followed by PAD zero bytes) as uint8."""
    walk = fields(buf, start, end)
    row = np.cumsum(~summary_mask) - 1  # a history message's row
    hist = ~summary_mask[walk.msg]
    exact = np.zeros(int((~summary_mask).sum()), dtype=bool)
    exact[row[walk.bad & ~summary_mask]] = True
    known = ((walk.number == 1) | (walk.number == 2)) & (walk.wire != LEN)
    exact[row[walk.msg[known & hist]]] = True
    summary = summary and not (walk.bad & summary_mask).any() and not (
        ((walk.number == 2) | known) & ~hist).any()
    items = walk.where(1, ordered=True)
    start, end = walk.start[items], walk.end[items]
    key_end, vstart, ok = item_layout(buf, start, end)
    msg = walk.msg[items]
    ident = pc.dictionary_encode(texts(data, start, key_end, pa.large_binary()))
    decoded = [item_of(span, item_class) for span in ident.dictionary.to_pylist()]
    value, numeric = numbers(texts(data, vstart, end))
    got = _Items(msg, start, vstart, end, ok,
                 ident.indices.to_numpy(zero_copy_only=False), decoded, value, numeric)
    in_summary = summary_mask[msg]
    rows = _history(buf, data, walk, got, np.flatnonzero(~in_summary), row, hist, exact)
    final = _summary(data, got, np.flatnonzero(in_summary), item_class) if summary else None
    return rows, final


def item_of(span, item_class):
    """The Item protobuf reads from the bytes `span`, or None where it rejects them (text
    that is not UTF-8: protobuf rejects the whole record)."""
    try:
        return item_class.FromString(bytes(span))
    except Exception:
        return None


def _history(buf, data, walk: Fields, items: _Items, at: np.ndarray, row: np.ndarray,
             hist: np.ndarray, exact: np.ndarray) -> History:
    step_field, has_step_field = _step_fields(buf, walk, hist, row, exact)
    rec = row[items.msg[at]]
    exact[rec[~items.ok[at]]] = True
    return history(data, exact, step_field, has_step_field, rec, items.ident[at], items.decoded,
                   items.vstart[at], items.end[at], items.value[at], items.numeric[at])


def history(data, exact: np.ndarray, step_field: np.ndarray, has_step_field: np.ndarray,
            rec: np.ndarray, ident: np.ndarray, decoded: list, vstart: np.ndarray,
            vend: np.ndarray, value: np.ndarray, numeric: np.ndarray) -> History:
    """The history rows from their items in the client's layout: per item its row `rec`, its
    key fields (`ident`: an index into `decoded`, protobuf's reading of them) and its value
    (`data[vstart:vend]`; `value` where `numeric`). `exact` marks the rows to decode exactly
    instead, and gains those this cannot prove it read."""
    m = len(exact)
    names, bad = [], []
    for i, item in enumerate(decoded):  # the exact decoder's reading of keys
        if item is None or (not item.key and len(item.nested_key) > 1):
            bad.append(i)  # not UTF-8, or a logged dict: one item per leaf
        names.append("" if item is None else item.key or (item.nested_key[0]
                                                          if item.nested_key else ""))
    if bad:  # (a logged dict's key in the summary only is no matter)
        dicts = np.zeros(len(decoded), dtype=bool)
        dicts[bad] = True
        exact[rec[dicts[ident]]] = True
    keys = list(dict.fromkeys(names))
    index = {k: i for i, k in enumerate(keys)}
    key = np.array([index[k] for k in names], dtype=np.int32)[ident]
    others = []
    for i in np.flatnonzero(~numeric):
        try:
            text = bytes(data[vstart[i]:vend[i]]).decode("utf-8")
        except UnicodeDecodeError:
            exact[rec[i]] = True
            continue
        try:
            value[i], numeric[i] = float(text), True
        except ValueError:
            if text.startswith("{"):  # a whole dict in one item, as older clients write it
                others.append((int(rec[i]), keys[key[i]], text))
    wall, logged_step, step = _bookkeeping(keys, rec, key, value, numeric, m, exact)
    keep = ~np.array([k in BOOKKEEPING for k in keys], bool)[key]
    if exact.any():
        keep &= ~exact[rec]
    if not numeric.all():
        keep &= numeric
    others = [o for o in others if not exact[o[0]] and o[1] not in BOOKKEEPING]
    return History(exact, step, logged_step, step_field, has_step_field, wall, rec[keep],
                   key[keep], value[keep], keys, others)


def _step_fields(buf: np.ndarray, walk: Fields, hist: np.ndarray, row: np.ndarray,
                 exact: np.ndarray):
    """History.step.num per record (a Step message once at most, its num once at most)."""
    m = len(exact)
    at = walk.where(2)
    at = at[hist[at]]
    msg = row[walk.msg[at]]
    exact[msg[np.bincount(msg, minlength=m)[msg] > 1]] = True
    step_field = np.zeros(m, dtype=np.int64)
    has = np.zeros(m, dtype=bool)
    has[msg] = True
    inner = fields(buf, walk.start[at], walk.end[at])
    exact[msg[inner.bad]] = True
    nums = inner.number == 1
    exact[msg[inner.msg[nums & (inner.wire != VARINT)]]] = True
    num = inner.where(1, VARINT)
    owner = inner.msg[num]
    exact[msg[owner[np.bincount(owner, minlength=len(at))[owner] > 1]]] = True
    step_field[msg[owner]] = inner.value[num].view(np.int64)
    return step_field, has


def _bookkeeping(keys, rec, key, value, numeric, m: int, exact: np.ndarray):
    """`_timestamp` and `_step` per record, as the exact decoder reads them (a `_step` that is
    no number is 0; one that is not finite, or logged twice, is left to that decoder)."""
    wall = np.full(m, np.nan)
    step = np.full(m, -1, dtype=np.int64)
    logged = np.zeros(m, dtype=bool)
    for name in ("_timestamp", "_step"):
        if name not in keys:
            continue
        at = np.flatnonzero(key == keys.index(name))
        owner = rec[at]
        exact[owner[np.bincount(owner, minlength=m)[owner] > 1]] = True
        got = np.where(numeric[at], value[at], np.nan if name == "_timestamp" else 0.0)
        if name == "_timestamp":
            wall[owner] = got
            continue
        fine = np.isfinite(got) & (np.abs(got) < 2.0**62)
        exact[owner[~fine]] = True
        step[owner[fine]] = np.trunc(got[fine]).astype(np.int64)
        logged[owner] = True
    return wall, logged, step


def _summary(data: bytes, items: _Items, at: np.ndarray, item_class):
    """`{key: Item}` as the updates leave it (keys in the order first set), or None."""
    if not items.ok[at].all():
        return None
    text = np.flatnonzero(~items.numeric[at])  # numbers are ASCII; the rest is checked
    if not utf8(data, items.vstart[at[text]], items.end[at[text]]):
        return None
    start, end = items.start[at], items.end[at]
    ident, distinct = pd.factorize(items.ident[at])  # keys numbered in order first set
    last = len(ident) - 1 - np.unique(ident[::-1], return_index=True)[1]  # each one's last set
    return final_summary(data, distinct, last, start[last], end[last], items.decoded,
                         item_class)


def utf8(data, start: np.ndarray, end: np.ndarray) -> bool:
    """Whether every span `data[start[i]:end[i]]` is UTF-8."""
    try:
        for a, b in zip(start.tolist(), end.tolist()):
            bytes(data[a:b]).decode("utf-8")
    except UnicodeDecodeError:
        return False  # protobuf rejects the whole record
    return True


def final_summary(data, idents: np.ndarray, last: np.ndarray, last_start: np.ndarray,
                  last_end: np.ndarray, decoded: list, item_class):
    """`{key: Item}` as the updates leave it, or None: `idents` are the distinct key fields
    the updates set (indices into `decoded`, in the order first set), `last` where each was
    set last (an update item's place), `data[last_start:last_end]` that item."""
    summary: dict = {}
    latest: dict = {}
    for i, span in enumerate(idents.tolist()):
        item = decoded[span]
        if item is None:
            return None
        key = item.key or ".".join(item.nested_key)
        if key[:1] != "_" and latest.get(key, (-1,))[0] < last[i]:
            latest[key] = (last[i], i)
            summary.setdefault(key, None)
    for key, (_, i) in latest.items():
        summary[key] = item_class.FromString(bytes(data[last_start[i]:last_end[i]]))
    return summary
