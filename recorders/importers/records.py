"""The framing of W&B's `.wandb` files (a LevelDB log), checked record by record.

The file starts with a 7-byte header: `:W&B`, the magic number 0xBEE1 (little-endian) and the
version 0. Then come blocks of 32 KiB; a record that does not fit in what is left of a block is
split into pieces (FIRST, MIDDLE..., LAST; a record that fits is FULL), and a block's last
bytes, too few for a piece's header, are zero padding. Each piece has a 7-byte header: the
CRC-32 (zlib's) of its type byte and data, the data's length (2 bytes) and the type (1 byte).

`read_records` returns every whole record up to the first piece that is cut short or fails its
checksum, and says where that is: what follows a damaged piece is not trusted.
"""
from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Optional

from tracelab.recorders.importers.tfrecord import Damage

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
BLOCK = 32768
_PIECE = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
_CRC = [zlib.crc32(bytes([t])) for t in range(256)]


def read_records(path: Path) -> tuple[list[bytes], Optional[Damage]]:
    """The whole records of a `.wandb` file, and where it stops being readable (or None)."""
    data = Path(path).read_bytes()
    if data[:len(HEADER)] != HEADER:
        what = "too short for" if len(data) < len(HEADER) else "not"
        return [], Damage(0, 0, f"{what} the W&B header (:W&B, version 0)", len(data))
    records: list[bytes] = []
    pending: list[bytes] = []
    start = offset = len(HEADER)  # start: where the record being assembled began
    size = len(data)
    while offset < size:
        left = BLOCK - offset % BLOCK
        if left < _PIECE:  # the block's padding
            offset += left
            continue
        if size - offset < _PIECE:
            return records, _damage(records, start, "the file ends inside a record's header",
                                    size)
        crc, length, kind = struct.unpack_from("<IHB", data, offset)
        if kind == 0 and length == 0 and crc == 0:  # zeros: padding, or preallocated space
            offset += left
            continue
        body_end = offset + _PIECE + length
        if length > left - _PIECE or kind not in (FULL, FIRST, MIDDLE, LAST):
            return records, _damage(records, start, "a damaged record header", size)
        if body_end > size:
            return records, _damage(records, start, "the file ends inside a record", size)
        body = data[offset + _PIECE:body_end]
        if zlib.crc32(body, _CRC[kind]) != crc:
            return records, _damage(records, start, "a checksum mismatch", size)
        if kind == FULL or kind == FIRST:
            if pending:
                return records, _damage(records, start, "a record cut off by the next", size)
            start = offset
        if kind == FULL:
            records.append(body)
        elif kind == FIRST:
            pending = [body]
        elif not pending:
            return records, _damage(records, offset, "a record piece without its start", size)
        else:
            pending.append(body)
            if kind == LAST:
                records.append(b"".join(pending))
                pending = []
        offset = body_end
        if not pending:
            start = offset
    if pending:
        return records, _damage(records, start, "the file ends inside a record", size)
    return records, None


def _damage(records: list[bytes], offset: int, reason: str, size: int) -> Damage:
    return Damage(len(records), offset, reason, size - offset)
