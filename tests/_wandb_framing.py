"""`.wandb` files framed by hand, and where to damage one so that the damage is what a test
means it to be."""
import struct
import zlib

from tracelab.recorders.importers.wandb_log import BLOCK, FIRST, FULL, HEADER, LAST, MIDDLE


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


def inside_a_record(data: bytes, at: int) -> int:
    """A byte of a record piece's data from `at` on (not a piece header, nor a block's zero
    padding), found by walking the pieces: what a flip there breaks is that piece's checksum."""
    pos = len(HEADER)
    while True:
        if BLOCK - pos % BLOCK < 7:  # a block's padding
            pos += BLOCK - pos % BLOCK
            continue
        start = pos + 7
        end = start + int.from_bytes(data[pos + 4:pos + 6], "little")
        if end > max(at, start):
            return max(at, start)
        pos = end
