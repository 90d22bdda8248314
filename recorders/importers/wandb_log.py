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
the reading there. W&B's own reader does the same with `struct` and `zlib.crc32`.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import replace
from typing import Optional

from tracelab.recorders.importers.tfrecord import BAD_CHECKSUM, CUT_HEADER, CUT_RECORD, Damage

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
BLOCK = 32768
_PIECE = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
BAD_HEADER = "a damaged record header"
CUT_BY_NEXT = "a record cut off by the next"
NO_START = "a record piece without its start"
_CRC = [zlib.crc32(bytes([t])) for t in range(256)]


def read_records(data: bytes) -> tuple[list[bytes], Optional[Damage]]:
    """The whole records of a `.wandb` file's bytes, piece by piece, going on past damage where
    the blocks allow, and what is damaged, where, and what was skipped (or None)."""
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


def _resumable(reason: str) -> bool:
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
        if resume is None and _resumable(reason):
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
