"""Where to damage a `.wandb` file so that the damage is what a test means it to be."""
from tracelab.recorders.importers.records import BLOCK, HEADER


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
