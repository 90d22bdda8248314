"""protowalk.fields against a plain field-by-field reading of the wire format, on random
messages of every wire type (long ones among short ones, and damaged ones)."""
import random

import numpy as np

from tracelab.recorders.importers.protowalk import PAD, fields


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def message(rng: random.Random, n: int) -> tuple[bytes, list]:
    """A message of n random fields, and (number, wire, start, end, value) of each, offsets
    from the message's start."""
    out, expected = bytearray(), []
    for _ in range(n):
        number = rng.choice([1, 2, 15, 16, 2047, 2048, (1 << 29) - 1])
        wire = rng.choice([0, 1, 2, 2, 2, 5])
        out += varint(number << 3 | wire)
        start, value = len(out), 0
        if wire == 0:
            value = rng.choice([0, 1, 127, 128, 300, 2**63, 2**64 - 1])
            out += varint(value)
        elif wire == 2:
            data = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 5, 127, 128, 300])))
            out += varint(len(data))
            start = len(out)
            out += data
        else:
            out += bytes(8 if wire == 1 else 4)
        expected.append((number, wire, start, len(out), value))
    return bytes(out), expected


def test_fields_as_read_one_by_one():
    rng = random.Random(0)
    sizes = [rng.choice([0, 1, 2, 3, 8]) for _ in range(200)] + [150, 90, 70]
    rng.shuffle(sizes)
    blob, starts, ends, expected = bytearray(), [], [], []
    for i, size in enumerate(sizes):
        data, fields_of = message(rng, size)
        if i % 37 == 5 and data:
            data = data[:-1]  # cut short: the walk reports it
            fields_of = None
        starts.append(len(blob))
        blob += data
        ends.append(len(blob))
        expected.append(fields_of)
    buf = np.frombuffer(bytes(blob) + bytes(PAD), dtype=np.uint8)
    walk = fields(buf, np.array(starts), np.array(ends))
    order = np.argsort(walk.rank)
    got = {m: [] for m in range(len(sizes))}
    for i in order:
        m = int(walk.msg[i])
        got[m].append((int(walk.number[i]), int(walk.wire[i]), int(walk.start[i]) - starts[m],
                       int(walk.end[i]) - starts[m], int(walk.value[i])))
    for m, fields_of in enumerate(expected):
        if fields_of is None:  # its last field runs past its end
            assert walk.bad[m] and not got[m], m
        else:
            assert not walk.bad[m] and got[m] == fields_of, m
    assert sorted(walk.rank.tolist()) == list(range(len(walk.msg)))
