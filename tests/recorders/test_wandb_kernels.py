"""The compiled decoder of .wandb files (wandb_kernels, numba) against the framing of
records.py and the reference decoder (protobuf, a message per record): on hand-framed files
damaged in every way the framing knows, on random records in layouts the client does not write,
and on runs of the real wandb client (offline) that crashed or were resumed. The numpy decoder
is held to the same (test_wandb_bulk.py runs with each); here it also reads without numba."""
import json
import os
import random
import subprocess
import sys
import textwrap
import types

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("google.protobuf")
pytest.importorskip("numba")

from tracelab.recorders.importers import wandb as wandb_import  # noqa: E402
from tracelab.recorders.importers import wandb_fast as fast  # noqa: E402
from tracelab.recorders.importers import wandb_kernels as kernels  # noqa: E402
from tracelab.recorders.importers import protowalk  # noqa: E402
from tracelab.recorders.importers.records import BLOCK, HEADER, read_records  # noqa: E402
from tracelab.recorders.importers.wandb import read_wandb  # noqa: E402
from test_protowalk import varint  # noqa: E402
from test_wandb_records import RECORDS, frame  # noqa: E402
from _wandb_framing import inside_a_record  # noqa: E402


def same_run(path):
    """The compiled, the numpy and the exact decoder read `path` as the same run."""
    exact = read_wandb(path, bulk=False)
    assert wandb_import.compiled_decoder() is kernels
    got = [read_wandb(path, compiled=True), read_wandb(path, compiled=False)]
    for imported in got:
        assert json.dumps(imported.meta) == json.dumps(exact.meta)
        for name, table in exact.tables.items():
            assert imported.tables[name].schema == table.schema, name
            pd.testing.assert_frame_equal(imported.tables[name].to_pandas(), table.to_pandas(),
                                          check_exact=True)
    return got[0]


def _damaged_files() -> list[bytes]:
    data = frame(RECORDS)  # a record over three blocks, one that ends where its block does
    many = frame([bytes([i % 251]) * (i % 700) for i in range(400)])
    files = [data, many, frame([]), HEADER, b"", b":W&", b"PK\x03\x04 something else"]
    files += [many[:n] for n in range(len(HEADER), len(many), 4093)]  # cut anywhere
    files += [data[:BLOCK], data[:BLOCK + 3], data[:2 * BLOCK + 7]]   # at or in a header
    for at in (len(HEADER) + 2, len(HEADER) + 9, BLOCK + 100, len(many) // 2, len(many) - 2):
        flipped = bytearray(many if at > 100 else data)
        flipped[at] ^= 0x10  # a checksum or a piece's data: a checksum mismatch
        files.append(bytes(flipped))
    header = bytearray(data)
    header[len(HEADER) + 6] = 9  # the first piece's type
    files.append(bytes(header))
    long = bytearray(data)
    long[len(HEADER) + 4:len(HEADER) + 6] = (BLOCK).to_bytes(2, "little")  # past its block
    files.append(bytes(long))
    pieces = frame([b"q" * (2 * BLOCK)])
    last_first = bytearray(pieces[:len(HEADER)] + pieces[BLOCK:])  # a piece without its start
    files += [bytes(last_first), pieces[:BLOCK] + frame([b"z"])[len(HEADER):]]  # cut off
    files.append(data + bytes(5000))  # preallocated space: zeros
    return files


def test_framing_is_read_records(tmp_path):
    """joined (in place, one pass) reads what read_records reads, and stops where it does,
    saying the same."""
    for i, content in enumerate(_damaged_files()):
        file = tmp_path / f"run-{i}.wandb"
        file.write_bytes(content)
        records, damage = read_records(file)
        buf, starts, ends, got = kernels.joined(file, 16)
        assert [buf[a:b].tobytes() for a, b in zip(starts, ends)] == records, i
        assert not buf[len(buf) - 16:].any()
        assert (got is None) == (damage is None), i
        assert got == damage, i  # where, why, and where reading went on past it


def _random_record(rng: random.Random) -> bytes:
    """Fields of Record's numbers and others, of every wire type, some of them broken."""
    out = bytearray()
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        number = rng.choice([1, 2, 3, 5, 17, 18, 4, 16, 300])
        wire = rng.choice([0, 1, 2, 2, 2, 5, 3])
        out += varint(number << 3 | wire)
        if wire == 0:
            out += varint(rng.choice([0, 5, 2**63]))
        elif wire == 2:
            out += varint(n := rng.choice([0, 3, 200])) + bytes(rng.randrange(256)
                                                                 for _ in range(n))
        elif wire in (1, 5):
            out += bytes(8 if wire == 1 else 4)
    if out and rng.random() < 0.1:
        out = out[:-1]  # cut short
    return bytes(out)


def test_record_kinds_are_protowalks():
    rng = random.Random(3)
    records = [_random_record(rng) for _ in range(3000)]
    blob = b"".join(records) + bytes(fast.PAD)
    ends = np.cumsum([len(r) for r in records])
    starts = ends - [len(r) for r in records]
    buf = np.frombuffer(blob, dtype=np.uint8)
    expected, es, ee = fast.record_kinds(protowalk.fields(buf, starts, ends), len(records))
    kinds, ks, ke = kernels._kinds(buf.copy(), starts, ends)
    assert np.array_equal(kinds, expected)
    known = kinds > 0
    assert np.array_equal(ks[known], es[known]) and np.array_equal(ke[known], ee[known])
    assert set(kinds.tolist()) >= {fast.EXACT, 0, fast.HISTORY, fast.SUMMARY}


def _field(number: int, data: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(data)) + data


def _item(rng: random.Random) -> bytes:
    """An Item: mostly in the client's layout, else in one it does not write."""
    key = rng.choice(["train/loss", "_step", "_timestamp", "val/acc", "k" * 200, "ü", "lr"])
    value = rng.choice(["0.5", "1e-7", "NaN", "-Infinity", "3", '"text"', "2.5", "true"])
    kind = rng.random()
    if kind < 0.75:
        fields = _field(2 if rng.random() < 0.8 else 1, key.encode())
    elif kind < 0.85:
        fields = _field(2, b"group") + _field(2, key.encode())  # a logged dict's leaf
    elif kind < 0.88:
        return _field(2, key.encode()) + b"\x31" + bytes(8)  # a `number` value
    elif kind < 0.94:
        return _field(2, key.encode()) + _field(16, value.encode()) + _field(2, b"late")
    else:
        return _field(16, value.encode()) + _field(2, key.encode())  # value first
    return fields + _field(16, value.encode())


def _random_row(rng: random.Random, step: int) -> bytes:
    items = [_item(rng) for _ in range(rng.choice([0, 1, 3, 6]))]
    if rng.random() < 0.5:
        items.append(_field(2, b"_step") + _field(16, str(step).encode()))
    body = b"".join(_field(1, i) for i in items)
    if rng.random() < 0.3:
        body += _field(2, b"\x08" + varint(step + rng.choice([0, 5])))  # History.step
    return _field(rng.choice([2, 2, 2, 3]), body)  # a history row or a summary update


def test_random_rows_read_as_the_exact_decoder(tmp_path):
    """Rows with and without `_step` or History.step, among rows and records left to
    protobuf: every decoder counts the same steps and reads the same values."""
    rng = random.Random(7)
    records = [_random_row(rng, s) for s in range(600)]
    records[100:100] = [b"\x12\xff\xff", _field(5, _field(1, _field(1, b"lr") + _field(16, b"1")))]
    folder = tmp_path / "offline-run-r"
    folder.mkdir()
    (folder / "run-r.wandb").write_bytes(frame(records))
    imported = same_run(folder)
    assert imported.tables["scalars"].num_rows > 300


def test_more_keys_than_the_first_table_holds(tmp_path, monkeypatch):
    """A new key every row: the walk starts again with a larger table, and reads the same."""
    rows = [_field(2, _field(1, _field(2, f"m{i}".encode()) + _field(16, b"1.5")))
            for i in range(300)]
    folder = tmp_path / "offline-run-k"
    folder.mkdir()
    (folder / "run-k.wandb").write_bytes(frame(rows))
    monkeypatch.setattr(kernels, "TABLE", 4)
    assert same_run(folder).tables["scalars"].num_rows == 300


def test_without_numba_the_numpy_decoder_reads(tmp_path, monkeypatch):
    folder = tmp_path / "offline-run-n"
    folder.mkdir()
    (folder / "run-n.wandb").write_bytes(frame([_field(2, _field(1, _field(
        2, b"train/loss") + _field(16, b"0.25")))]))
    monkeypatch.setitem(sys.modules, "numba", None)  # `import numba` raises ImportError
    monkeypatch.delitem(sys.modules, kernels.__name__)
    monkeypatch.delattr(sys.modules["tracelab.recorders.importers"], "wandb_kernels")
    monkeypatch.setattr(wandb_import, "_COMPILED", [])
    assert wandb_import.compiled_decoder() is None
    assert read_wandb(folder).tables["scalars"].to_pandas()["value"].tolist() == [0.25]


def test_the_numpy_decoder_until_numba_pays_for_its_start(monkeypatch):
    """A run or two: numpy's decoder (numba's start costs a second); once the numpy decoder
    has read NUMPY_BYTES in a process, or where numba is started already, the compiled one."""
    monkeypatch.setattr(wandb_import, "_COMPILED", [])
    monkeypatch.setattr(wandb_import, "_NUMPY_READ", [0])
    monkeypatch.setattr(wandb_import, "compiled_decoder",  # loaded once, then kept
                        lambda: wandb_import._COMPILED.append(kernels) or kernels)
    monkeypatch.delitem(sys.modules, "numba")
    run = wandb_import.NUMPY_BYTES // 4
    for _ in range(3):
        assert wandb_import.pick_decoder(run) is None
    assert wandb_import.pick_decoder(run) is wandb_import.pick_decoder(1) is kernels
    monkeypatch.setattr(wandb_import, "_COMPILED", [])
    monkeypatch.setattr(wandb_import, "_NUMPY_READ", [0])
    assert wandb_import.pick_decoder(2 * wandb_import.NUMPY_BYTES) is kernels  # one big file
    monkeypatch.setattr(wandb_import, "_COMPILED", [])
    monkeypatch.setattr(wandb_import, "_NUMPY_READ", [0])
    monkeypatch.setitem(sys.modules, "numba", types.ModuleType("numba"))
    assert wandb_import.pick_decoder(run) is kernels


_CLIENT = textwrap.dedent(r"""
    import os, sys
    import wandb
    root, mode = sys.argv[1], sys.argv[2]
    settings = wandb.Settings(console="off", x_disable_stats=True)
    if mode == "resumed":  # one id, two processes' worth of logging: two folders
        for part in range(2):
            run = wandb.init(project="kernels", name="resumed", id="resumed1", resume="allow",
                             dir=root, settings=settings)
            for step in range(part * 30, part * 30 + 30):
                run.log({"train/loss": 1.0 / (step + 1), "count": step}, step=step)
            run.summary["part"] = part
            run.finish(exit_code=part)
    else:  # killed: the file ends where the last whole block was written
        run = wandb.init(project="kernels", name="crashed", dir=root, settings=settings)
        for step in range(1500):
            run.log({"train/loss": 1.0 / (step + 1), **{f"m{j}": j / 4 for j in range(8)}})
        run.summary["best"] = 0.5
        os._exit(3)
""")


@pytest.fixture(scope="module")
def client_runs(tmp_path_factory):
    pytest.importorskip("wandb")
    root = tmp_path_factory.mktemp("wandb-kernels")
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true",
           "WANDB_DISABLE_GIT": "true", "NO_PROXY": "*"}
    for mode in ("resumed", "crashed"):
        proc = subprocess.run([sys.executable, "-c", _CLIENT, str(root), mode],
                              capture_output=True, text=True, env=env, cwd=root, timeout=300)
        assert proc.returncode == (0 if mode == "resumed" else 3), proc.stderr[-3000:]
    return sorted((root / "wandb").glob("offline-run-*"))


def test_crashed_and_resumed_runs_of_the_client(client_runs):
    assert len(client_runs) == 3
    states, crashed = [], None
    for folder in client_runs:
        imported = same_run(folder)
        name = imported.meta["name"]
        if name == "crashed":
            crashed = (folder, imported)
        else:
            assert not imported.problems, imported.problems
        states.append((name, imported.meta["status"]["state"]))
    assert sorted(states) == [("crashed", "running"), ("resumed", "completed"),
                              ("resumed", "failed")]
    # Whether the kill cut a record depends on when W&B's service process last wrote: the
    # crashed run's problems, when there are any, name its file (cuts are tested below).
    folder, imported = crashed
    file = next(folder.glob("run-*.wandb")).name
    assert all(file in problem for problem in imported.problems), imported.problems



@pytest.mark.parametrize("damage", ["checksum", "cut"])
def test_damaged_file_of_the_client(client_runs, tmp_path, damage):
    """A bad checksum in the middle, or the last block cut short: every decoder reads the
    records before it (and past a checksum, the blocks after its own), and says what it could
    not read."""
    crashed = next(f for f in client_runs if read_wandb(f, bulk=False).meta["name"] == "crashed")
    copy = tmp_path / crashed.name
    copy.mkdir()
    source = next(crashed.glob("run-*.wandb"))
    data = bytearray(source.read_bytes())
    if damage == "checksum":
        assert len(data) > 3 * BLOCK  # the middle is not in the last block
        data[inside_a_record(data, len(data) // 2)] ^= 0x01
    else:
        data = data[:len(data) - BLOCK // 3]
    (copy / source.name).write_bytes(bytes(data))
    imported = same_run(copy)
    reason = "a checksum mismatch" if damage == "checksum" else "ends inside a record"
    assert reason in " ".join(imported.problems)
    assert 0 < imported.tables["scalars"].num_rows < 1500 * 9
    if damage == "checksum":  # read on from the next block: the run's last steps are there
        whole = read_wandb(crashed, bulk=False).tables["scalars"]
        last = lambda table: max(table.column("step").to_pylist())  # noqa: E731
        assert last(imported.tables["scalars"]) == last(whole)
