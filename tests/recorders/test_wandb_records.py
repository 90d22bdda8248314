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
        if damage is not None:
            assert (got.record, got.offset, got.reason) == (damage.record, damage.offset,
                                                            damage.reason)
