"""The framing of TensorBoard event files (TFRecord), checked record by record.

An event file is a sequence of records: an 8-byte little-endian length, a 4-byte masked CRC-32C
of that length, the data, and a 4-byte masked CRC-32C of the data. TensorBoard's reader stops
at the first record that fails its checksum or is cut short, and says nothing about what it
left out; `check_records` finds that record, so an import can say what it could not read.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tracelab.core.files import read_inside

_HEADER = 12   # length (8) + its checksum (4)
_FOOTER = 4    # the data's checksum
# Why a record file stops being readable, as Damage.reason words it (the W&B reader too).
CUT_HEADER = "the file ends inside a record's header"
CUT_RECORD = "the file ends inside a record"
BAD_CHECKSUM = "a checksum mismatch"


@dataclass(frozen=True)
class Damage:
    """Where an event file stops being readable; or, where the format lets reading go on past
    the damage (W&B's blocks), what was skipped."""
    record: int        # index of the first bad record (records before it are whole)
    offset: int        # its byte offset
    reason: str
    after: int         # bytes from `offset` to the end of the file
    resumed: Optional[int] = None  # where reading went on, when it did
    later: tuple["Damage", ...] = ()  # damage found after that

    def describe(self, name: str) -> str:
        return f"{name}: " + "; then ".join(d._text() for d in (self, *self.later))

    def _text(self) -> str:
        where = f"{self.reason} in record {self.record} at byte {self.offset}"
        if self.resumed is None:
            return (f"{where}; the last {self.after} bytes of the file (record {self.record} "
                    "on) were not read")
        return (f"{where}; {self.resumed - self.offset} bytes skipped, reading went on at "
                f"byte {self.resumed}")


def _crc32c():
    """google-crc32c (C, with the tensorboard extra) reads about 1,000x faster than
    TensorBoard's pure-Python fallback, which checks about 6 MB/s."""
    try:
        from google_crc32c import value
        return value
    except ImportError:
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import crc32c
        return crc32c


def _masked_crc(data: bytes, crc=None) -> int:
    x = (crc or _crc32c())(data) & 0xFFFFFFFF
    return (((x >> 15) | (x << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def check_records(path: Path, folder: Optional[Path] = None) -> Optional[Damage]:
    """The first unreadable record of an event file, or None when every record is whole.
    OSError when it is not a regular file inside `folder` (its own, by default)."""
    path = Path(path)
    data = read_inside(path, path.parent if folder is None else folder)
    crc = _crc32c()
    offset, record, size = 0, 0, len(data)
    while offset < size:
        if size - offset < _HEADER:
            return Damage(record, offset, CUT_HEADER, size - offset)
        header = data[offset:offset + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[offset + 8:offset + _HEADER])
        if _masked_crc(header, crc) != length_crc:
            return Damage(record, offset, "a damaged record length", size - offset)
        end = offset + _HEADER + length + _FOOTER
        if end > size:
            return Damage(record, offset, CUT_RECORD, size - offset)
        body = data[offset + _HEADER:offset + _HEADER + length]
        (body_crc,) = struct.unpack("<I", data[end - _FOOTER:end])
        if _masked_crc(body, crc) != body_crc:
            return Damage(record, offset, BAD_CHECKSUM, size - offset)
        offset, record = end, record + 1
    return None
