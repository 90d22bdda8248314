"""The framing of .wandb files (records.py) on hand-framed files: records split across blocks,
block padding, and each kind of damage. Files written by wandb itself are read in
tests/core/test_archive_formats.py."""
import struct
import zlib

from tracelab.recorders.importers.records import (BLOCK, FIRST, FULL, HEADER, LAST, MIDDLE,
                                                  read_joined, read_records)


def frame(records: list[bytes]) -> bytes:
    """LevelDB log framing as W&B writes it (wandb's leveldb writer, CRC-32 of type + data)."""
    out = bytearray(HEADER)
    for data in records:
        first = True
        while True:
            left = BLOCK - len(out) % BLOCK
            if left < 7:
                out += b"\0" * left
                left = BLOCK
            chunk, data = data[:left - 7], data[left - 7:]
            kind = (FULL if first else LAST) if not data else (FIRST if first else MIDDLE)
            out += struct.pack("<IHB", zlib.crc32(chunk, zlib.crc32(bytes([kind]))),
                               len(chunk), kind) + chunk
            first = False
            if not data:
                break
    return bytes(out)


RECORDS = [b"a" * 10, bytes(range(256)) * 300, b"b" * (BLOCK - 7 - 7 - 11 - 3), b"c" * 5]


def test_records_split_across_blocks_and_padding(tmp_path):
    file = tmp_path / "run-x.wandb"
    file.write_bytes(frame(RECORDS))
    records, damage = read_records(file)
    assert damage is None and records == RECORDS


def test_truncated_file_keeps_the_whole_records(tmp_path):
    data = frame(RECORDS)
    file = tmp_path / "run-x.wandb"
    file.write_bytes(data[:40_000])  # inside the second record, which spans three blocks
    records, damage = read_records(file)
    assert records == RECORDS[:1]
    assert damage.record == 1 and "ends inside a record" in damage.reason
    assert damage.offset == len(HEADER) + 7 + 10


def test_checksum_mismatch_stops_at_the_damaged_record(tmp_path):
    data = bytearray(frame(RECORDS))
    data[-2] ^= 1  # inside the last record
    file = tmp_path / "run-x.wandb"
    file.write_bytes(bytes(data))
    records, damage = read_records(file)
    assert records == RECORDS[:3] and damage.reason == "a checksum mismatch"


def _record_starts(records: list[bytes]) -> list[int]:
    """Where each record's first piece lies in frame(records)."""
    starts = []
    for i in range(len(records)):
        at = len(frame(records[:i]))
        starts.append(at + (BLOCK - at % BLOCK if BLOCK - at % BLOCK < 7 else 0))
    return starts


MANY = [bytes([i % 251]) * (300 + i % 500) for i in range(300)]  # about 5 blocks


def test_reading_goes_on_at_the_next_block_after_a_damaged_piece(tmp_path):
    """A flipped byte loses its record and the rest of its block, and the record split into
    the next block; every record that begins after that boundary is read."""
    data, starts = bytearray(frame(MANY)), _record_starts(MANY)
    bad = next(i for i, at in enumerate(starts) if at > 1000)
    data[starts[bad] + 7 + 5] ^= 0x01
    file = tmp_path / "run-x.wandb"
    file.write_bytes(bytes(data))
    records, damage = read_records(file)
    after = [r for r, at in zip(MANY, starts) if at >= BLOCK]
    assert records == MANY[:bad] + after
    assert len(after) > 200 and MANY[bad] not in records
    assert damage.reason == "a checksum mismatch" and damage.record == bad
    assert damage.offset == starts[bad] and damage.resumed == BLOCK and damage.later == ()
    assert damage.describe("run-x.wandb") == (
        f"run-x.wandb: a checksum mismatch in record {bad} at byte {starts[bad]}; "
        f"{BLOCK - starts[bad]} bytes skipped, reading went on at byte {BLOCK}")


def test_each_damaged_block_is_skipped_and_a_cut_end_still_ends_the_reading(tmp_path):
    data, starts = bytearray(frame(MANY)), _record_starts(MANY)
    first = next(i for i, at in enumerate(starts) if at > 100)
    second = next(i for i, at in enumerate(starts) if at > 2 * BLOCK + 100)
    data[starts[first] + 5] = 0xFF       # a length past its block: a damaged header
    data[starts[second] + 7] ^= 0x01     # a checksum
    cut = bytes(data[:len(data) - 50])   # and the last record cut short
    file = tmp_path / "run-x.wandb"
    file.write_bytes(cut)
    records, damage = read_records(file)
    keep = [r for i, (r, at) in enumerate(zip(MANY, starts))
            if i < first or BLOCK <= at < starts[second] or at >= 3 * BLOCK]
    assert records == keep[:-1]
    reasons = [damage.reason] + [d.reason for d in damage.later]
    assert reasons == ["a damaged record header", "a checksum mismatch",
                       "the file ends inside a record"]
    assert [damage.resumed] + [d.resumed for d in damage.later] == [BLOCK, 3 * BLOCK, None]
    text = damage.describe("run-x.wandb")
    assert text.count("; then ") == 2 and text.endswith("were not read") and "\n" not in text


def test_a_record_cut_off_by_the_next_loses_only_itself(tmp_path):
    whole = frame([b"a" * 10, b"b" * 20])
    start = len(HEADER) + 7 + 10
    lone_first = struct.pack("<IHB", zlib.crc32(b"x" * 8, zlib.crc32(bytes([FIRST]))), 8,
                             FIRST) + b"x" * 8
    file = tmp_path / "run-x.wandb"
    file.write_bytes(whole[:start] + lone_first + whole[start:])
    records, damage = read_records(file)
    assert records == [b"a" * 10, b"b" * 20]
    assert damage.reason == "a record cut off by the next" and damage.resumed == start + 15


def test_not_a_wandb_file(tmp_path):
    file = tmp_path / "run-x.wandb"
    file.write_bytes(b"PK\x03\x04 something else")
    records, damage = read_records(file)
    assert records == [] and "W&B header" in damage.reason


def test_joined_records_are_the_records(tmp_path):
    """read_joined (all blocks walked at once) against read_records (piece by piece), on whole,
    truncated and damaged files: the same records, the same damage."""
    data = frame(RECORDS)
    flipped = bytearray(data)
    flipped[-2] ^= 1
    header = bytearray(data)
    header[len(HEADER) + 6] = 9  # the first piece's type
    for i, content in enumerate([data, data[:40_000], bytes(flipped), bytes(header),
                                 frame([]), frame([b"x" * 5] * 5000)]):
        file = tmp_path / f"run-{i}.wandb"
        file.write_bytes(content)
        records, damage = read_records(file)
        joined, starts, ends, got = read_joined(file, pad=16)
        assert [joined[a:b] for a, b in zip(starts, ends)] == records
        assert joined[len(joined) - 16:] == bytes(16)
        assert (got is None) == (damage is None)
        assert got == damage
