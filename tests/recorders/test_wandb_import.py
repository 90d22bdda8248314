"""W&B runs read by the importer: files written by the real wandb client (offline: a varied
run, a plain one, a crashed one, a resumed one, and copies of them truncated or damaged), and
hand-made records in layouts the client does not write (fields in another order, `number`
values, records split across blocks, text that is not UTF-8, a record that is no Record)."""
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("wandb")
pytest.importorskip("google.protobuf")

from tracelab.recorders.importers import wandb_proto  # noqa: E402
from tracelab.recorders.importers.wandb import read_wandb  # noqa: E402
from tracelab.recorders.importers.wandb_log import BLOCK  # noqa: E402
from _wandb_framing import frame, inside_a_record  # noqa: E402


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


_CLIENT = textwrap.dedent(r"""
    import math, os, sys
    import numpy as np
    import wandb
    root = sys.argv[1]
    settings = wandb.Settings(console="off", x_disable_stats=True)

    # varied: nested dicts, histograms, strings, NaN and infinities, booleans, big and negative
    # numbers, skipped steps, several log calls per step, commit=False, long and non-ASCII keys,
    # summary values set by hand (a dict among them) and a summary key deleted
    run = wandb.init(project="import", name="varied", dir=root, config={"lr": 0.1, "n": 3},
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

    # plain: what most runs are
    run = wandb.init(project="import", name="plain", dir=root, config={"lr": 0.01},
                     settings=settings)
    values = np.random.default_rng(1).random((300, 12))
    for step in range(300):
        run.log({f"train/m{j}": float(values[step, j]) for j in range(12)})
    run.summary["best_acc"] = 0.9
    run.finish()
""")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("wandb-import")
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true",
           "WANDB_DISABLE_GIT": "true", "NO_PROXY": "*"}
    proc = subprocess.run([sys.executable, "-c", _CLIENT, str(root)], capture_output=True,
                          text=True, env=env, cwd=root, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = {}
    for folder in sorted((root / "wandb").glob("offline-run-*")):
        found[read_wandb(folder).meta["name"]] = folder
    assert sorted(found) == ["plain", "varied"]
    return found


def test_varied_run(runs):
    imported = read_wandb(runs["varied"])
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


def test_plain_run(runs):
    imported = read_wandb(runs["plain"])
    scalars = imported.tables["scalars"].to_pandas()
    assert len(scalars) == 300 * 12 and not imported.problems
    logged = np.random.default_rng(1).random((300, 12))  # the client's, value for value
    for j in (0, 3, 11):
        series = scalars[(scalars["split"] == "train") & (scalars["name"] == f"m{j}")]
        assert series["step"].tolist() == list(range(300))
        assert np.array_equal(series["value"].to_numpy(), logged[:, j])
    assert np.isfinite(scalars["wall_time"]).all()
    assert imported.meta["source"]["summary"]["best_acc"] == 0.9
    assert imported.meta["config"] == {"lr": 0.01} and imported.meta["name"] == "plain"
    assert imported.meta["status"]["state"] == "completed"


@pytest.mark.parametrize("keep", [0.3, 0.77])
def test_truncated_file_reads_its_first_rows(runs, tmp_path, keep):
    copy = tmp_path / "run"
    shutil.copytree(runs["plain"], copy)
    file = next(copy.glob("run-*.wandb"))
    data = file.read_bytes()
    file.write_bytes(data[:int(len(data) * keep)])
    imported = read_wandb(copy)
    assert "ends inside a record" in " ".join(imported.problems)
    assert imported.meta["status"]["state"] == "running"  # no exit record: killed
    got = imported.tables["scalars"].to_pandas()
    assert 0 < len(got) < 300 * 12
    whole = read_wandb(runs["plain"]).tables["scalars"].to_pandas()
    first = whole[whole["step"] <= got["step"].max()]  # every row up to the cut, as logged
    key = ["step", "split", "name"]
    merged = got.merge(first, on=key, how="outer", suffixes=("", "_whole"), indicator=True)
    assert (merged["_merge"] == "both").sum() == len(got)
    assert len(first) - len(got) < 12  # the last step's row may be cut
    assert np.array_equal(merged["value"].dropna(), merged["value_whole"][merged["value"].notna()])


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
    imported = read_wandb(folder)
    scalars = imported.tables["scalars"].to_pandas()
    loss = scalars[scalars["name"] == "loss"]
    assert list(loss["step"][:5]) == [0, 1, 2, 7, 8]
    assert list(loss["value"][:5]) == [1.0, 2.5, 0.5, 0.25, 0.125]
    assert list(loss["value"][5:]) == [i / 7 for i in range(200)]
    assert scalars[scalars["name"] == "x" * 300]["step"].tolist() == [9]
    assert imported.meta["source"]["summary"] == {"best": 0.2}
    assert any("not W&B's" in p for p in imported.problems)


def test_steps_of_rows_with_and_without_one(tmp_path):
    """A row's step: its `_step` (NaN or one past 2**62 counts as 0), else its History.step,
    else the row counter, which each row moves to one past the larger of the counter and the
    row's step (a step may go back; the counter does not)."""
    Record, Item = _messages()

    def row(loss: float, step=None, field=None) -> bytes:
        items = [Item(nested_key=["loss"], value_json=repr(loss))]
        if step is not None:
            items.append(Item(nested_key=["_step"], value_json=step))
        history = {"item": items} if field is None else {"item": items, "step": {"num": field}}
        return Record(history=history).SerializeToString()

    records = [row(0.0), row(1.0, "5"), row(2.0), row(3.0, "2"), row(4.0), row(5.0, field=20),
               row(6.0, "3", field=30), row(7.0), row(8.0, "NaN"), row(9.0, "1e300")]
    folder = tmp_path / "offline-run-s"
    folder.mkdir()
    (folder / "run-s.wandb").write_bytes(frame(records))
    loss = read_wandb(folder).tables["scalars"].to_pandas()
    by_value = dict(zip(loss["value"], loss["step"]))
    assert by_value == {0.0: 0, 1.0: 5, 2.0: 6, 3.0: 2, 4.0: 8, 5.0: 20, 6.0: 3, 7.0: 22,
                        8.0: 0, 9.0: 0}


def test_records_across_blocks(tmp_path):
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
    scalars = read_wandb(folder).tables["scalars"].to_pandas()
    assert len(scalars) == 4002
    m7 = scalars[scalars["name"] == "m7"]
    assert m7["step"].tolist() == [1] and m7["value"].tolist() == [7.5]
    assert scalars[scalars["name"] == "m0"]["value"].tolist() == [9.0, 0.5, 9.0]


def test_a_file_without_history(tmp_path):
    Record, Item = _messages()
    records = [Record(summary={"update": [Item(key="best", value_json="1")]}).SerializeToString(),
               Record(config={"update": [Item(key="lr", value_json="0.1")]}).SerializeToString()]
    folder = tmp_path / "offline-run-z"
    folder.mkdir()
    (folder / "run-z.wandb").write_bytes(frame(records))
    imported = read_wandb(folder)
    assert imported.meta["config"] == {"lr": 0.1} and imported.tables["scalars"].num_rows == 0
    assert imported.meta["source"]["summary"] == {"best": 1}
    (folder / "run-z.wandb").write_bytes(frame([]))
    imported = read_wandb(folder)
    assert imported.tables["scalars"].num_rows == 0 and not imported.problems


def test_long_rows_among_short_ones(tmp_path):
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
    scalars = read_wandb(folder).tables["scalars"].to_pandas()
    assert len(scalars) == 3 * 101 + 500 + 300
    assert scalars[scalars["name"] == "m499"]["step"].tolist() == [100]
    assert scalars[scalars["name"] == "m2"]["step"].tolist() == list(range(103))


def test_text_that_is_not_utf8(tmp_path):
    """protobuf rejects a record whose strings are not UTF-8: the record is skipped and
    listed."""
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
    imported = read_wandb(folder)
    assert list(imported.tables["scalars"].to_pandas()["value"]) == [1.0, 3.0]
    assert imported.meta["source"]["summary"] == {"best": 1}
    assert sum("not W&B's" in p for p in imported.problems) == 3


_ENDINGS = textwrap.dedent(r"""
    import os, sys
    import wandb
    root, mode = sys.argv[1], sys.argv[2]
    settings = wandb.Settings(console="off", x_disable_stats=True)
    if mode == "resumed":  # one id, two processes' worth of logging: two folders
        for part in range(2):
            run = wandb.init(project="endings", name="resumed", id="resumed1", resume="allow",
                             dir=root, settings=settings)
            for step in range(part * 30, part * 30 + 30):
                run.log({"train/loss": 1.0 / (step + 1), "count": step}, step=step)
            run.summary["part"] = part
            run.finish(exit_code=part)
    else:  # killed: the file ends where the last whole block was written
        run = wandb.init(project="endings", name="crashed", dir=root, settings=settings)
        for step in range(1500):
            run.log({"train/loss": 1.0 / (step + 1), **{f"m{j}": j / 4 for j in range(8)}})
        run.summary["best"] = 0.5
        os._exit(3)
""")


@pytest.fixture(scope="module")
def endings(tmp_path_factory):
    """{name: [folders]} of runs that crashed, or were resumed (a folder per part)."""
    root = tmp_path_factory.mktemp("wandb-endings")
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true",
           "WANDB_DISABLE_GIT": "true", "NO_PROXY": "*"}
    for mode in ("resumed", "crashed"):
        proc = subprocess.run([sys.executable, "-c", _ENDINGS, str(root), mode],
                              capture_output=True, text=True, env=env, cwd=root, timeout=300)
        assert proc.returncode == (0 if mode == "resumed" else 3), proc.stderr[-3000:]
    found: dict = {}
    for folder in sorted((root / "wandb").glob("offline-run-*")):
        found.setdefault(read_wandb(folder).meta["name"], []).append(folder)
    return found


def test_crashed_and_resumed_runs_of_the_client(endings):
    assert sorted(endings) == ["crashed", "resumed"] and len(endings["resumed"]) == 2
    parts = sorted((read_wandb(f) for f in endings["resumed"]),
                   key=lambda r: r.meta["source"]["exit_code"])
    assert [p.meta["status"]["state"] for p in parts] == ["completed", "failed"]
    for part, imported in enumerate(parts):
        assert not imported.problems, imported.problems
        loss = imported.tables["scalars"].to_pandas().query("name == 'loss'")
        assert loss["step"].tolist() == list(range(part * 30, part * 30 + 30))
        assert loss["value"].tolist() == [1.0 / (s + 1) for s in loss["step"]]
    crashed = read_wandb(endings["crashed"][0])
    assert crashed.meta["status"]["state"] == "running"  # no exit record: killed
    # Whether the kill cut a record depends on when W&B's service process last wrote: the
    # crashed run's problems, when there are any, name its file (cuts are tested below).
    file = next(endings["crashed"][0].glob("run-*.wandb")).name
    assert all(file in problem for problem in crashed.problems), crashed.problems


@pytest.mark.parametrize("damage", ["checksum", "cut"])
def test_damaged_file_of_the_client(endings, tmp_path, damage):
    """A bad checksum in the middle, or the last block cut short: the records before it are
    read (and past a checksum, the blocks after its own), and the problems say what was not."""
    crashed = endings["crashed"][0]
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
    imported = read_wandb(copy)
    reason = "a checksum mismatch" if damage == "checksum" else "ends inside a record"
    assert reason in " ".join(imported.problems)
    got = imported.tables["scalars"].to_pandas()
    assert 0 < len(got) < 1500 * 9
    whole = read_wandb(crashed).tables["scalars"].to_pandas()
    key = ["step", "split", "name"]
    assert len(got.merge(whole, on=key + ["value"])) == len(got)  # each row as logged
    if damage == "checksum":  # read on from the next block: the run's last steps are there
        assert got["step"].max() == whole["step"].max()
