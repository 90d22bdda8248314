"""The protobuf wire format of many messages at once, walked in lock-step with numpy.

A `.wandb` file holds thousands of records that look alike (a history row of 50 items, then a
summary update, per logged step). Decoding them one message object per item costs about a
microsecond per item in Python; walking the wire format of all messages together costs a few
numpy operations per field *position*: iteration k reads the k-th field of every message that
has one (its tag, its length or varint value) and advances them all. A history row of 53 items
takes 53 iterations, whatever the number of rows.

`fields` reports which messages it could not walk (a truncated varint, a length past the end of
the message, a group or an unknown wire type); callers decode those exactly, or give up on
them. The few messages still being walked after 64 rounds (one history row of thousands of
items) are walked field by field in Python, where a round would cost more.
Only the layout is read here: what the fields mean is the caller's business.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional

import numpy as np

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5
PAD = 16  # zero bytes a walked buffer must carry past its end (a varint is at most 10 bytes)
_MAX_LEN = 1 << 31
_ROUNDS, _FEW = 64, 16  # after 64 rounds, fewer than 16 messages left: walked one by one


@dataclass
class Fields:
    """The fields of messages `0..n-1`, in the order the walk found them (round by round)."""
    msg: np.ndarray     # the message of each field
    number: np.ndarray  # its field number
    wire: np.ndarray    # its wire type
    start: np.ndarray   # LEN: where its data starts; others: where its value starts
    end: np.ndarray     # where the field ends
    value: np.ndarray   # VARINT: its value (uint64); 0 otherwise
    index: np.ndarray   # its place among its message's fields
    bad: np.ndarray     # per message: True where the walk could not prove its layout

    @cached_property
    def rank(self) -> np.ndarray:
        """Each field's place in message order (message by message, each in wire order): the
        k-th field of message m goes to offset[m] + k (a counting sort)."""
        n = len(self.bad)
        offset = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.msg, minlength=n), out=offset[1:])
        return offset[self.msg] + self.index

    def where(self, number: int, wire: int = LEN, ordered: bool = False) -> np.ndarray:
        """The indices of field `number` (with wire type `wire`), in message order if asked."""
        at = np.flatnonzero((self.number == number) & (self.wire == wire))
        if not ordered:
            return at
        slots = np.full(len(self.msg), -1, dtype=np.int64)
        slots[self.rank[at]] = at
        return slots[slots >= 0]


_VALID_WIRE = np.array([True, True, True, False, False, True, False, False])


def varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The varints at `pos`: (values as uint64, their sizes in bytes, too long: more than 10)."""
    byte = buf[pos]
    value = (byte & 0x7F).astype(np.uint64)
    size = np.ones(len(pos), dtype=np.int64)
    more = np.flatnonzero(byte & 0x80)
    k = 1
    while more.size and k < 10:
        byte = buf[pos[more] + k]
        value[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        size[more] += 1
        more = more[(byte & 0x80) != 0]
        k += 1
    long = np.zeros(len(pos), dtype=bool)
    long[more] = True
    return value, size, long


def _tags(buf: np.ndarray, p: np.ndarray):
    """(field numbers, wire types, tag sizes, malformed) of the tags at `p`."""
    byte = buf[p]
    if byte.max(initial=0) < 0x80:  # fields 1-15: one-byte tags, the usual case
        return (byte >> 3).astype(np.int64), byte & 7, 1, np.zeros(len(p), dtype=bool)
    tag, size, wrong = varints(buf, p)
    number = (tag >> np.uint64(3)).astype(np.int64)
    wrong |= (number == 0) | (number >= 1 << 29)
    return number, (tag & np.uint64(7)).astype(np.uint8), size, wrong


# Tag bytes of a field 1-15 with wire type LEN: one-byte tags, the usual case.
_SHORT_LEN_TAG = np.array([b < 0x80 and b & 7 == LEN and b >> 3 > 0 for b in range(256)])


def fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Fields:
    """Every field of the messages `buf[starts[i]:ends[i]]` (`buf`: uint8, with PAD zero
    bytes past the last message)."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    n = len(starts)
    bad = np.zeros(n, dtype=bool)
    active = np.flatnonzero(starts < ends)  # the messages still walked, where, and their ends
    p, limit = starts[active], ends[active]
    rounds = []
    while active.size:
        if active.size < _FEW and len(rounds) >= _ROUNDS:  # a few long messages: a round
            return _assembled(rounds, n, bad, _tail(buf, active, p, limit, bad, len(rounds)))
        tag, length = buf[p], buf[p + 1]
        if _SHORT_LEN_TAG[tag].all() and length.max() < 0x80:  # short LEN fields only
            start = p + 2
            end = start + length
            if (end > limit).any():
                ok = end <= limit
                bad[active[~ok]] = True
                active, tag, start, end, limit = (a[ok] for a in (active, tag, start, end, limit))
            rounds.append((active, tag >> 3, None, start, end, None))
        else:
            active, number, wire, start, end, value, limit = _round(buf, p, active, limit, bad)
            rounds.append((active, number, wire, start, end, value))
        more = end < limit
        active, p, limit = active[more], end[more], limit[more]
    return _assembled(rounds, n, bad)


def _tail(buf: np.ndarray, active: np.ndarray, pos: np.ndarray, limit: np.ndarray,
          bad: np.ndarray, k: int) -> list:
    """The rest of a few long messages, field by field in Python (costs less than a round per
    field): (message, number, wire, start, end, value, index in its message) per field."""
    view = memoryview(buf)
    found = []
    for m, p, stop in zip(active.tolist(), pos.tolist(), limit.tolist()):
        fields, j = [], k
        while p < stop:
            tag, p = _varint(view, p)
            number, wire = (tag or 0) >> 3, (tag or 0) & 7
            if tag is None or not 0 < number < 1 << 29 or wire not in (VARINT, FIXED64, LEN,
                                                                       FIXED32):
                break
            start, value = p, 0
            if wire == VARINT:
                value, p = _varint(view, p)
            elif wire == LEN:
                size, start = _varint(view, p)
                p = start + (size if size is not None and size < _MAX_LEN else stop + 1)
            else:
                p += 8 if wire == FIXED64 else 4
            if value is None or p > stop:
                break
            fields.append((m, number, wire, start, p, value, j))
            j += 1
        else:
            found.extend(fields)
            continue
        bad[m] = True
    return found


def _varint(view: memoryview, p: int) -> tuple[Optional[int], int]:
    value = 0
    for shift in range(0, 70, 7):
        byte = view[p]
        p += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & 0xFFFFFFFFFFFFFFFF, p
    return None, p


def _round(buf: np.ndarray, p: np.ndarray, active: np.ndarray, limit: np.ndarray,
           bad: np.ndarray) -> tuple:
    """One round of `fields` for any tags and wire types."""
    number, wire, size, wrong = _tags(buf, p)
    wrong = wrong | (number == 0) | ~_VALID_WIRE[wire]
    start = p + size
    end = start.copy()
    value = np.zeros(len(p), dtype=np.uint64)
    for kind in (VARINT, LEN):
        at = np.flatnonzero(wire == kind)
        if at.size:
            got, got_size, too_long = varints(buf, start[at])
            wrong[at] |= too_long
            if kind == VARINT:
                value[at] = got
                end[at] += got_size
            else:
                wrong[at] |= got >= _MAX_LEN
                start[at] += got_size
                end[at] = start[at] + np.minimum(got, _MAX_LEN).astype(np.int64)
    end[wire == FIXED64] += 8
    end[wire == FIXED32] += 4
    wrong |= end > limit
    if not wrong.any():
        return active, number, wire, start, end, value, limit
    bad[active[wrong]] = True
    ok = ~wrong
    return tuple(a[ok] for a in (active, number, wire, start, end, value, limit))


def _assembled(rounds: list, n: int, bad: np.ndarray, tail: list = ()) -> Fields:
    """The rounds' fields together (and those of `_tail`, after them). A message found bad
    in round k still has its fields of rounds 0..k-1: they are dropped, as callers decode bad
    messages some other way."""
    if tail:
        columns = [np.array(c, dtype=kind) for c, kind in zip(zip(*tail), (
            np.int64, np.int64, np.uint8, np.int64, np.int64, np.uint64, np.int64))]
        rounds = rounds + [tuple(columns[:6])]
    if not rounds:
        empty = np.zeros(0, dtype=np.int64)
        return Fields(empty, empty, empty.astype(np.uint8), empty, empty,
                      empty.astype(np.uint64), empty, bad)
    sizes = [len(r[0]) for r in rounds]
    total = sum(sizes)
    msg, number, start, end = (np.concatenate([r[i] for r in rounds]) for i in (0, 1, 3, 4))
    number = number.astype(np.int64, copy=False)
    if all(r[2] is None for r in rounds):  # short LEN fields only: the usual case
        wire, value = np.full(total, LEN, dtype=np.uint8), np.zeros(total, dtype=np.uint64)
    else:
        wire = np.concatenate([np.full(size, LEN, np.uint8) if r[2] is None else r[2]
                               for r, size in zip(rounds, sizes)])
        value = np.concatenate([np.zeros(size, np.uint64) if r[5] is None else r[5]
                                for r, size in zip(rounds, sizes)])
    index = np.repeat(np.arange(len(sizes)), sizes)  # round k: the k-th field of a message
    if tail:
        index[total - len(tail):] = columns[6]
    fields = Fields(msg, number, wire, start, end, value, index, bad)
    if not bad.any():
        return fields
    keep = ~bad[msg]
    rank = fields.rank[keep]
    kept = Fields(*(c[keep] for c in (msg, number, wire, start, end, value)), index[keep], bad)
    kept.__dict__["rank"] = np.searchsorted(np.sort(rank), rank)  # ranks 0..N-1 again
    return kept
