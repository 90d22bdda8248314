"""The framing of .wandb files (wandb_log.py) on hand-framed files: records split across
blocks, block padding, preallocated space, and each kind of damage. Files written by wandb
itself are read in tests/core/test_archive_formats.py and test_wandb_import.py."""
import struct
import zlib

import pytest

from tracelab.recorders.importers.wandb_log import BLOCK, FIRST, HEADER, read_records
from _wandb_framing import frame


RECORDS = [b"a" * 10, bytes(range(256)) * 300, b"b" * (BLOCK - 7 - 7 - 11 - 3), b"c" * 5]


def test_records_split_across_blocks_and_padding():
    records, damage = read_records(frame(RECORDS))
    assert damage is None and records == RECORDS


def test_truncated_file_keeps_the_whole_records():
    data = frame(RECORDS)
    # inside the second record, which spans three blocks
    records, damage = read_records(data[:40_000])
    assert records == RECORDS[:1]
    assert damage.record == 1 and "ends inside a record" in damage.reason
    assert damage.offset == len(HEADER) + 7 + 10


def test_checksum_mismatch_stops_at_the_damaged_record():
    data = bytearray(frame(RECORDS))
    data[-2] ^= 1  # inside the last record
    records, damage = read_records(bytes(data))
    assert records == RECORDS[:3] and damage.reason == "a checksum mismatch"


def _record_starts(records: list[bytes]) -> list[int]:
    """Where each record's first piece lies in frame(records)."""
    starts = []
    for i in range(len(records)):
        at = len(frame(records[:i]))
        starts.append(at + (BLOCK - at % BLOCK if BLOCK - at % BLOCK < 7 else 0))
    return starts


MANY = [bytes([i % 251]) * (300 + i % 500) for i in range(300)]  # about 5 blocks


def test_reading_goes_on_at_the_next_block_after_a_damaged_piece():
    """A flipped byte loses its record and the rest of its block, and the record split into
    the next block; every record that begins after that boundary is read."""
    data, starts = bytearray(frame(MANY)), _record_starts(MANY)
    bad = next(i for i, at in enumerate(starts) if at > 1000)
    data[starts[bad] + 7 + 5] ^= 0x01
    records, damage = read_records(bytes(data))
    after = [r for r, at in zip(MANY, starts) if at >= BLOCK]
    assert records == MANY[:bad] + after
    assert len(after) > 200 and MANY[bad] not in records
    assert damage.reason == "a checksum mismatch" and damage.record == bad
    assert damage.offset == starts[bad] and damage.resumed == BLOCK and damage.later == ()
    assert damage.describe("run-x.wandb") == (
        f"run-x.wandb: a checksum mismatch in record {bad} at byte {starts[bad]}; "
        f"{BLOCK - starts[bad]} bytes skipped, reading went on at byte {BLOCK}")


def test_each_damaged_block_is_skipped_and_a_cut_end_still_ends_the_reading():
    data, starts = bytearray(frame(MANY)), _record_starts(MANY)
    first = next(i for i, at in enumerate(starts) if at > 100)
    second = next(i for i, at in enumerate(starts) if at > 2 * BLOCK + 100)
    data[starts[first] + 5] = 0xFF       # a length past its block: a damaged header
    data[starts[second] + 7] ^= 0x01     # a checksum
    cut = bytes(data[:len(data) - 50])   # and the last record cut short
    records, damage = read_records(cut)
    keep = [r for i, (r, at) in enumerate(zip(MANY, starts))
            if i < first or BLOCK <= at < starts[second] or at >= 3 * BLOCK]
    assert records == keep[:-1]
    reasons = [damage.reason] + [d.reason for d in damage.later]
    assert reasons == ["a damaged record header", "a checksum mismatch",
                       "the file ends inside a record"]
    assert [damage.resumed] + [d.resumed for d in damage.later] == [BLOCK, 3 * BLOCK, None]
    text = damage.describe("run-x.wandb")
    assert text.count("; then ") == 2 and text.endswith("were not read") and "\n" not in text


def test_a_record_cut_off_by_the_next_loses_only_itself():
    whole = frame([b"a" * 10, b"b" * 20])
    start = len(HEADER) + 7 + 10
    lone_first = struct.pack("<IHB", zlib.crc32(b"x" * 8, zlib.crc32(bytes([FIRST]))), 8,
                             FIRST) + b"x" * 8
    records, damage = read_records(whole[:start] + lone_first + whole[start:])
    assert records == [b"a" * 10, b"b" * 20]
    assert damage.reason == "a record cut off by the next" and damage.resumed == start + 15


def test_not_a_wandb_file():
    records, damage = read_records(b"PK\x03\x04 something else")
    assert records == [] and "W&B header" in damage.reason


def test_a_piece_without_its_start_is_skipped_and_reading_goes_on():
    """The LAST piece of a record whose FIRST lies in no block read (a lost block): said, and
    the records after it read."""
    pieces = frame([b"q" * (2 * BLOCK), b"after"])
    data = pieces[:len(HEADER)] + pieces[2 * BLOCK:]  # the record's last piece, then "after"
    records, damage = read_records(data)
    assert records == [b"after"]
    assert damage.reason == "a record piece without its start" and damage.offset == len(HEADER)
    assert damage.resumed is not None and damage.later == ()


def test_preallocated_zeros_end_the_records_without_damage():
    records, damage = read_records(frame(RECORDS) + bytes(5000))
    assert damage is None and records == RECORDS


@pytest.mark.parametrize("cut", [len(HEADER) + 3, BLOCK + 3])
def test_a_file_cut_inside_a_piece_header(cut):
    records, damage = read_records(frame(RECORDS)[:cut])
    assert damage.reason == "the file ends inside a record's header" and damage.resumed is None
    assert records == (RECORDS[:1] if cut > BLOCK else [])


def test_too_short_for_the_header():
    for data in (b"", b":W&"):
        records, damage = read_records(data)
        assert records == [] and "too short for the W&B header" in damage.reason
