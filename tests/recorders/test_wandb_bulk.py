"""The bulk decoders of .wandb files, compiled (wandb_kernels, numba) and numpy (wandb_fast,
protowalk: where numba is missing), each against the exact one (a protobuf message per record):
the same run, table for table and value for value, on files written by the real wandb client
(offline), on a truncated file, and on hand-made records in layouts the client does not write
(fields in another order, `number` values, a record that is no Record)."""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("wandb")
pytest.importorskip("google.protobuf")

from tracelab.recorders.importers import wandb as wandb_import  # noqa: E402
from tracelab.recorders.importers import wandb_exact  # noqa: E402
from tracelab.recorders.importers import wandb_proto  # noqa: E402
from tracelab.recorders.importers.records import BLOCK  # noqa: E402
from tracelab.recorders.importers.wandb import read_wandb  # noqa: E402
from test_protowalk import varint as _varint  # noqa: E402
from test_wandb_records import frame  # noqa: E402

_CLIENT = textwrap.dedent(r"""
    import math, os, sys
    import numpy as np
    import wandb
    root = sys.argv[1]
    settings = wandb.Settings(console="off", x_disable_stats=True)

    # varied: nested dicts, histograms, strings, NaN and infinities, booleans, big and negative
    # numbers, skipped steps, several log calls per step, commit=False, long and non-ASCII keys,
    # summary values set by hand (a dict among them) and a summary key deleted
    run = wandb.init(project="bulk", name="varied", dir=root, config={"lr": 0.1, "n": 3},
                     settings=settings)
    rng = np.random.default_rng(0)
    long_key = "train/" + "k" * 150
    for step in (0, 1, 2, 5, 6, 9, 20, 21):
        run.log({"train/loss": float(rng.random()), "lr": 0.1, long_key: step * 0.5},
                step=step)
        run.log({"val/acc": 0.5 + step / 100, "loss/ü": -1.5e-7 * step}, step=step)
        if step % 2:
            run.log({"nested": {"a": step, "b": {"c": 1.25}}, "flag": True, "note": "text",
                     "big": 2 ** 70, "none": None, "pair": [1, 2]}, step=step)
        if step == 5:
            run.log({"bad": float("nan"), "up": float("inf"), "down": float("-inf")},
                    step=step)
        if step == 9:
            run.log({"gradients/fc.weight": wandb.Histogram(rng.standard_normal(200))},
                    step=step)
        run.log({"partial": step}, step=step, commit=False)
    run.summary["best"] = 0.75
    run.summary["info"] = {"epoch": 3}
    run.summary["gone"] = 1
    del run.summary["gone"]
    run.finish()

    # plain: what most runs are, every record within reach of the bulk decoder
    run = wandb.init(project="bulk", name="plain", dir=root, config={"lr": 0.01},
                     settings=settings)
    values = rng.random((300, 12))
    for step in range(300):
        run.log({f"train/m{j}": float(values[step, j]) for j in range(12)})
    run.summary["best_acc"] = 0.9
    run.finish()
""")


@pytest.fixture(autouse=True, params=["compiled", "numpy"])
def decoder(request, monkeypatch):
    """Each test with each bulk decoder (read_wandb takes the one loaded)."""
    if request.param == "numpy":
        monkeypatch.setattr(wandb_import, "_COMPILED", [None])
    elif wandb_import.compiled_decoder() is None:
        pytest.skip("numba is not installed: no compiled decoder")
    return request.param


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("wandb-bulk")
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true",
           "WANDB_DISABLE_GIT": "true", "NO_PROXY": "*"}
    proc = subprocess.run([sys.executable, "-c", _CLIENT, str(root)], capture_output=True,
                          text=True, env=env, cwd=root, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = {}
    for folder in sorted((root / "wandb").glob("offline-run-*")):
        found[read_wandb(folder, bulk=False).meta["name"]] = folder
    assert sorted(found) == ["plain", "varied"]
    return found


def assert_same(path):
    """The bulk and the exact decoder read `path` as the same run."""
    bulk, exact = read_wandb(path), read_wandb(path, bulk=False)
    assert json.dumps(bulk.meta, sort_keys=False) == json.dumps(exact.meta, sort_keys=False)
    assert bulk.tables.keys() == exact.tables.keys()
    for name, table in exact.tables.items():
        assert bulk.tables[name].schema == table.schema, name
        pd.testing.assert_frame_equal(bulk.tables[name].to_pandas(), table.to_pandas(),
                                      check_exact=True)
    return bulk


def test_varied_run_reads_the_same(runs):
    imported = assert_same(runs["varied"])
    scalars = imported.tables["scalars"].to_pandas()
    names = set(scalars["name"])
    assert {"loss", "acc", "nested.a", "nested.b.c", "partial", "big"} <= names
    assert "k" * 150 in names and "loss/ü" in names
    bad = scalars[scalars["name"] == "bad"]["value"]
    assert len(bad) == 1 and np.isnan(bad.iloc[0])
    assert sorted(scalars[scalars["name"] == "loss"]["step"]) == [0, 1, 2, 5, 6, 9, 20, 21]
    summary = imported.meta["source"]["summary"]
    assert summary["best"] == 0.75 and "gone" not in summary
    assert imported.tables["tensors"].num_rows == 1  # the gradient histogram


def test_plain_run_is_decoded_in_bulk(runs, monkeypatch):
    imported = assert_same(runs["plain"])
    assert len(imported.tables["scalars"]) == 300 * 12
    assert imported.meta["source"]["summary"]["best_acc"] == 0.9
    exact = []
    decode = wandb_exact.exact_record
    monkeypatch.setattr(wandb_exact, "exact_record",
                        lambda data, reading, name: exact.append(
                            reading.record_class.FromString(data)) or decode(data, reading,
                                                                             name))
    read_wandb(runs["plain"])
    # only the run, config and exit records are left to protobuf
    kinds = {next(f.name for f, _ in record.ListFields() if f.name != "num") for record in exact}
    assert kinds <= {"run", "config", "exit"} and len(exact) <= 4


@pytest.mark.parametrize("keep", [0.3, 0.77])
def test_truncated_file_reads_the_same(runs, tmp_path, keep):
    copy = tmp_path / "run"
    shutil.copytree(runs["plain"], copy)
    file = next(copy.glob("run-*.wandb"))
    data = file.read_bytes()
    file.write_bytes(data[:int(len(data) * keep)])
    imported = assert_same(copy)
    assert "ends inside a record" in " ".join(imported.problems)
    assert 0 < len(imported.tables["scalars"]) < 300 * 12


def _messages():
    return wandb_proto.record_class(), wandb_proto.item_class()


def test_hand_made_records_in_other_layouts(tmp_path):
    Record, Item = _messages()

    def history(items: list[bytes], step=None) -> bytes:
        body = b"".join(b"\x0a" + _varint(len(i)) + i for i in items)
        if step is not None:
            inner = b"\x08" + _varint(step)
            body += b"\x12" + _varint(len(inner)) + inner
        return b"\x12" + _varint(len(body)) + body  # Record.history

    def item(key: str, value: str) -> bytes:
        return Item(nested_key=[key], value_json=value).SerializeToString()

    reversed_item = (Item(value_json="2.5").SerializeToString()
                     + Item(nested_key=["train/loss"]).SerializeToString())
    records = [
        history([item("train/loss", "1.0"), item("_step", "0")]),
        history([reversed_item, item("_step", "1")]),                       # value first
        history([Item(key="train/loss", number=0.5).SerializeToString(),   # a `number` value
                 item("_step", "2")]),
        history([item("train/loss", "0.25")], step=7),                     # Step, no _step
        b"\x12\xff\xff",                                                    # not a Record
        history([item("train/loss", "0.125"), item("_timestamp", "1700000000.5")]),
        history([item("train/loss", '"text"'), item("x" * 300, "3")]),
        Record(summary={"update": [Item(key="best", value_json="0.1")]}).SerializeToString(),
        Record(summary={"update": [Item(nested_key=["best"], value_json="0.2")]}
               ).SerializeToString(),
    ] + [history([item("train/loss", f"{i / 7!r}")]) for i in range(200)]
    folder = tmp_path / "offline-run-x"
    folder.mkdir()
    (folder / "run-x.wandb").write_bytes(frame(records))
    imported = assert_same(folder)
    scalars = imported.tables["scalars"].to_pandas()
    loss = scalars[scalars["name"] == "loss"]
    assert list(loss["step"][:5]) == [0, 1, 2, 7, 8]
    assert list(loss["value"][:5]) == [1.0, 2.5, 0.5, 0.25, 0.125]
    assert imported.meta["source"]["summary"] == {"best": 0.2}
    assert any("not W&B's" in p for p in imported.problems)


def test_records_across_blocks_read_the_same(tmp_path):
    """A history record longer than a block (split into pieces) between ordinary ones."""
    _, Item = _messages()
    items = b"".join(b"\x0a" + _varint(len(i)) + i for i in (
        Item(nested_key=[f"m{j}"], value_json=f"{j}.5").SerializeToString()
        for j in range(4000)))
    big = b"\x12" + _varint(len(items)) + items
    assert len(big) > BLOCK
    small = Item(nested_key=["m0"], value_json="9").SerializeToString()
    small = b"\x12" + _varint(len(small) + 2) + b"\x0a" + _varint(len(small)) + small
    folder = tmp_path / "offline-run-y"
    folder.mkdir()
    (folder / "run-y.wandb").write_bytes(frame([small, big, small]))
    imported = assert_same(folder)
    assert len(imported.tables["scalars"]) == 4002


def test_a_file_without_history(tmp_path):
    Record, Item = _messages()
    records = [Record(summary={"update": [Item(key="best", value_json="1")]}).SerializeToString(),
               Record(config={"update": [Item(key="lr", value_json="0.1")]}).SerializeToString()]
    folder = tmp_path / "offline-run-z"
    folder.mkdir()
    (folder / "run-z.wandb").write_bytes(frame(records))
    imported = assert_same(folder)
    assert imported.meta["config"] == {"lr": 0.1} and imported.tables["scalars"].num_rows == 0
    (folder / "run-z.wandb").write_bytes(frame([]))
    assert assert_same(folder).tables["scalars"].num_rows == 0


def test_long_rows_among_short_ones(tmp_path, monkeypatch):
    """A row of hundreds of items among short rows: walked field by field once the short ones
    are done (protowalk's tail), still in bulk."""
    _, Item = _messages()

    def row(n: int, step: int) -> bytes:
        items = [Item(nested_key=[f"m{j}"], value_json=f"{j}.5").SerializeToString()
                 for j in range(n)] + [Item(nested_key=["_step"], value_json=str(step))
                                       .SerializeToString()]
        body = b"".join(b"\x0a" + _varint(len(i)) + i for i in items)
        return b"\x12" + _varint(len(body)) + body

    records = [row(3, s) for s in range(100)] + [row(500, 100), row(300, 101), row(3, 102)]
    folder = tmp_path / "offline-run-w"
    folder.mkdir()
    (folder / "run-w.wandb").write_bytes(frame(records))
    exact = []
    decode = wandb_exact.exact_record
    monkeypatch.setattr(wandb_exact, "exact_record",
                        lambda data, reading, name: exact.append(data) or decode(data, reading,
                                                                                 name))
    assert len(read_wandb(folder).tables["scalars"]) == 3 * 101 + 500 + 300
    assert exact == []
    monkeypatch.undo()
    assert_same(folder)


def test_text_that_is_not_utf8(tmp_path):
    """protobuf rejects a record whose strings are not UTF-8 (the record is skipped and
    listed); the bulk decoder leaves such records to it."""
    def item(key: bytes, value: bytes) -> bytes:
        return (b"\x12" + _varint(len(key)) + key + b"\x82\x01" + _varint(len(value)) + value)

    def record(field: bytes, items: list[bytes]) -> bytes:
        body = b"".join(b"\x0a" + _varint(len(i)) + i for i in items)
        return field + _varint(len(body)) + body

    history, summary = b"\x12", b"\x1a"
    records = [record(history, [item(b"loss", b"1.0"), item(b"_step", b"0")]),
               record(history, [item(b"loss", b"\xff"), item(b"_step", b"1")]),
               record(history, [item(b"lo\xffss", b"2.0"), item(b"_step", b"2")]),
               record(history, [item(b"loss", b"3.0"), item(b"_step", b"3")]),
               record(summary, [item(b"best", b"1")]),
               record(summary, [item(b"best", b'"\xff"')])]
    folder = tmp_path / "offline-run-u"
    folder.mkdir()
    (folder / "run-u.wandb").write_bytes(frame(records))
    imported = assert_same(folder)
    assert list(imported.tables["scalars"].to_pandas()["value"]) == [1.0, 3.0]
    assert imported.meta["source"]["summary"] == {"best": 1}
    assert sum("not W&B's" in p for p in imported.problems) == 3
