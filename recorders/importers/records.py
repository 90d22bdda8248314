"""The framing of W&B's `.wandb` files (a LevelDB log), checked record by record.

The file starts with a 7-byte header: `:W&B`, the magic number 0xBEE1 (little-endian) and the
version 0. Then come blocks of 32 KiB; a record that does not fit in what is left of a block is
split into pieces (FIRST, MIDDLE..., LAST; a record that fits is FULL), and a block's last
bytes, too few for a piece's header, are zero padding. Each piece has a 7-byte header: the
CRC-32 (zlib's) of its type byte and data, the data's length (2 bytes) and the type (1 byte).

`read_records` returns every whole record, and says where the file is damaged. A piece that
fails its checksum or whose header is damaged loses the record it belongs to and the rest of
its block: reading goes on at the next block, past the pieces there that continue a record
begun before (LevelDB's own recovery). A file that ends inside a record (a killed writer) ends
the reading there. `read_joined` returns the same records joined in one buffer, for decoding
in bulk: it finds the pieces of all blocks at once (numpy, the blocks walked in lock-step), and
reads the file piece by piece only where that finds something amiss, to say what and where.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Optional

import numpy as np

from tracelab.recorders.importers.tfrecord import BAD_CHECKSUM, CUT_HEADER, CUT_RECORD, Damage

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
BLOCK = 32768
_PIECE = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
BAD_HEADER = "a damaged record header"
CUT_BY_NEXT = "a record cut off by the next"
NO_START = "a record piece without its start"
# Why read_records stopped; wandb_frames' compiled reader gives an index into it (0: it didn't).
REASONS = ("", CUT_HEADER, BAD_HEADER, CUT_RECORD, BAD_CHECKSUM, CUT_BY_NEXT, NO_START)
_CRC = [zlib.crc32(bytes([t])) for t in range(256)]


def read_joined(path: Path, pad: int = 0) -> tuple[bytes, np.ndarray, np.ndarray,
                                                  Optional[Damage]]:
    """`read_records`, the records joined: (their bytes followed by `pad` zero bytes, where
    each starts and ends in them, the damage or None)."""
    data = Path(path).read_bytes()
    pieces = _pieces(data) if data[:len(HEADER)] == HEADER else None
    if pieces is not None:
        joined = _joined(data, *pieces, pad)
        if joined is not None:
            return (*joined, None)
    return joined_exactly(data, pad)


def joined_exactly(data: bytes, pad: int = 0) -> tuple[bytes, np.ndarray, np.ndarray,
                                                       Optional[Damage]]:
    """read_joined's result from the record-by-record reader (a damaged file)."""
    records, damage = _read_exactly(data)
    sizes = np.fromiter(map(len, records), dtype=np.int64, count=len(records))
    ends = np.cumsum(sizes)
    return b"".join(records) + bytes(pad), ends - sizes, ends, damage


def read_records(path: Path) -> tuple[list[bytes], Optional[Damage]]:
    """The whole records of a `.wandb` file, and where it stops being readable (or None)."""
    return _read_exactly(Path(path).read_bytes())


def _pieces(data: bytes) -> Optional[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """(where each piece's data starts and ends, its type, its checksum) for every piece of a
    file whose headers are whole, in file order; None where a header is damaged or the file
    ends early. Pieces never cross blocks: each block is walked on its own, all at once."""
    size = len(data)
    buf = np.frombuffer(data, dtype=np.uint8)
    pos = np.arange(0, size, BLOCK, dtype=np.int64)
    pos[0] = len(HEADER)
    block_end = np.minimum(pos - pos % BLOCK + BLOCK, size)
    active = np.flatnonzero(pos < block_end)
    found = []
    while active.size:
        p = pos[active]
        room = BLOCK - p % BLOCK >= _PIECE  # else the block's padding
        if (size - p[room] < _PIECE).any():
            return None  # the file ends inside a record's header
        head = buf[np.minimum(p[:, None] + np.arange(_PIECE), size - 1)].astype(np.int64)
        crc = head[:, 0] | head[:, 1] << 8 | head[:, 2] << 16 | head[:, 3] << 24
        length, kind = head[:, 4] | head[:, 5] << 8, head[:, 6]
        zeros = (crc == 0) & (length == 0) & (kind == 0)  # padding, or preallocated space
        piece = room & ~zeros
        end = p + _PIECE + length
        wrong = (end > p - p % BLOCK + BLOCK) | (kind < FULL) | (kind > LAST) | (end > size)
        if wrong[piece].any():
            return None
        found.append((p[piece] + _PIECE, end[piece], kind[piece], crc[piece]))
        pos[active] = end
        active = active[piece & (end < block_end[active])]
    if not found:
        return (np.zeros(0, dtype=np.int64),) * 4
    start, end, kind, crc = (np.concatenate(c) for c in zip(*found))
    order = np.argsort(start)
    return start[order], end[order], kind[order], crc[order]


def _joined(data: bytes, start: np.ndarray, end: np.ndarray, kind: np.ndarray,
            crc: np.ndarray, pad: int) -> Optional[tuple[bytes, np.ndarray, np.ndarray]]:
    """The records of pieces that all check out and fit together (FULL, or FIRST MIDDLE...
    LAST), joined; None otherwise. The records are the pieces' data end to end."""
    view = memoryview(data)
    bodies = [view[a:b] for a, b in zip(start.tolist(), end.tolist())]
    kinds = kind.tolist()
    if [zlib.crc32(body, _CRC[k]) for body, k in zip(bodies, kinds)] != crc.tolist():
        return None
    size = end - start
    stop = np.cumsum(size)
    first = kind != FULL
    if first.any():  # records split across blocks: FIRST, MIDDLE..., LAST, one after another
        pending, previous = False, -1
        for i, k in zip(np.flatnonzero(first).tolist(), kind[first].tolist()):
            if (k == FIRST) == pending or (pending and i != previous + 1):
                return None
            pending, previous = k != LAST, i
        if pending:
            return None
        last = (kind == FULL) | (kind == LAST)
        begins = np.concatenate([[True], last[:-1]])
        stop, starts = stop[last], (stop - size)[begins]
    else:
        starts = stop - size
    return b"".join(bodies + [bytes(pad)]), starts, stop


def _read_exactly(data: bytes) -> tuple[list[bytes], Optional[Damage]]:
    """The records piece by piece, going on past damage where the blocks allow: what is
    damaged, where, and what was skipped."""
    if data[:len(HEADER)] != HEADER:
        what = "too short for" if len(data) < len(HEADER) else "not"
        return [], Damage(0, 0, f"{what} the W&B header (:W&B, version 0)", len(data))
    records: list[bytes] = []
    found: list[Damage] = []
    offset, resyncing = len(HEADER), False
    while True:
        offset, damage = _read_from(data, offset, records, resyncing)
        if damage is None:
            break
        found.append(damage)
        if damage.resumed is None:
            break
        offset, resyncing = damage.resumed, True
    if not found:
        return records, None
    return records, replace(found[0], later=tuple(found[1:]))


def resumable(reason: str) -> bool:
    """Whether reading goes on after damage of this kind (the file does not end there)."""
    return reason in (BAD_HEADER, BAD_CHECKSUM, CUT_BY_NEXT, NO_START)


def _read_from(data: bytes, offset: int, records: list[bytes], resyncing: bool
               ) -> tuple[int, Optional[Damage]]:
    """Append the records from `offset` on to `records`, up to the first damage: (where that
    is, the damage, with where reading may go on), or (the end, None). `resyncing`: pieces
    that continue a record begun before `offset` are skipped, up to the first that begins
    one."""
    pending: list[bytes] = []
    start = offset  # where the record being assembled began
    size = len(data)

    def damaged(at: int, reason: str, resume: Optional[int] = None) -> tuple[int, Damage]:
        if resume is None and resumable(reason):
            resume = offset - offset % BLOCK + BLOCK  # the next block
        if resume is not None and resume >= size:
            resume = None
        return at, replace(_damage(records, at, reason, size), resumed=resume)

    while offset < size:
        left = BLOCK - offset % BLOCK
        if left < _PIECE:  # the block's padding
            offset += left
            continue
        if size - offset < _PIECE:
            return damaged(start, CUT_HEADER)
        crc, length, kind = struct.unpack_from("<IHB", data, offset)
        if kind == 0 and length == 0 and crc == 0:  # zeros: padding, or preallocated space
            offset += left
            continue
        body_end = offset + _PIECE + length
        if length > left - _PIECE or kind not in (FULL, FIRST, MIDDLE, LAST):
            return damaged(start, BAD_HEADER)
        if body_end > size:
            return damaged(start, CUT_RECORD)
        body = data[offset + _PIECE:body_end]
        if zlib.crc32(body, _CRC[kind]) != crc:
            return damaged(start, BAD_CHECKSUM)
        if kind == FULL or kind == FIRST:
            resyncing = False
            if pending:  # the record in progress is lost; this piece begins the next
                return damaged(start, CUT_BY_NEXT, offset)
            start = offset
        if kind == FULL:
            records.append(body)
        elif kind == FIRST:
            pending = [body]
        elif resyncing:  # the rest of a record whose start lay in the damage
            offset = start = body_end
            continue
        elif not pending:
            return damaged(offset, NO_START, body_end)
        else:
            pending.append(body)
            if kind == LAST:
                records.append(b"".join(pending))
                pending = []
        offset = body_end
        if not pending:
            start = offset
    if pending:
        return damaged(start, CUT_RECORD)
    return offset, None


def _damage(records: list[bytes], offset: int, reason: str, size: int) -> Damage:
    return Damage(len(records), offset, reason, size - offset)
