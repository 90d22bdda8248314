"""The run writer and reader: crash recovery, corrupt parts, bad directories."""
import json
import re
import os
import shutil
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tracelab
from tracelab.core.errors import TraceError
from tracelab.core.batches import to_batch
from tracelab.core import writer as writer_module
from tracelab.core.writer import FLUSH_ITEMS, RunWriter


def _scalars(step, value):
    return ("scalars", {"step": [step], "split": ["train"], "name": ["loss"], "value": [value],
                        "wall_time": [time.time()]})


def _write(path, steps, close=True, **kwargs):
    writer = RunWriter(path, {"config": {"lr": 0.1}}, flush_interval=0.05, **kwargs)
    for step in range(steps):
        writer.write(_scalars(step, 1.0 / (step + 1)))
    if close:
        writer.close()
    return writer


def test_closed_run_is_parquet_only(tmp_path):
    _write(tmp_path / "run", 50)
    files = os.listdir(tmp_path / "run" / "scalars")
    assert files == ["r0-000000.parquet"]
    run = tracelab.open_run(tmp_path / "run")
    assert run.status["state"] == "completed" and run.step_range == (0, 49)
    assert run.meta["config"] == {"lr": 0.1}


def test_status_is_decided_once_per_opened_run(tmp_path):
    writer = _write(tmp_path / "run", 5, close=False)
    assert writer.flush()
    run = tracelab.open_run(tmp_path / "run")
    assert run.status["state"] == "running" and run.rank_status(0) == run.status
    writer.close()  # the run ends while it is being analyzed: one analysis sees one status
    assert run.status["state"] == "running"
    assert tracelab.open_run(tmp_path / "run").status["state"] == "completed"


def test_parts_roll_and_read_back_in_order(tmp_path):
    _write(tmp_path / "run", 120, part_rows=25)
    # Rolling happens at flush time, so parts hold at least part_rows rows each.
    parts = sorted(os.listdir(tmp_path / "run" / "scalars"))
    assert all(p.endswith(".parquet") for p in parts)
    assert list(tracelab.open_run(tmp_path / "run").loss().index) == list(range(120))


def _write_in_chunks(writer, chunks, size):
    for chunk in range(chunks):
        for step in range(chunk * size, (chunk + 1) * size):
            writer.write(_scalars(step, float(step)))
        assert writer.flush()  # each chunk becomes its own batch (or part)


def test_truncated_tail_keeps_every_complete_batch(tmp_path):
    writer = RunWriter(tmp_path / "live", flush_interval=60)
    _write_in_chunks(writer, 4, 10)
    # What a killed process leaves: the open tail, its last batch cut short.
    shutil.copytree(tmp_path / "live", tmp_path / "killed")
    writer.close()
    tail = tmp_path / "killed" / "scalars" / "r0-000000.arrows"
    with open(tail, "r+b") as f:
        f.truncate(tail.stat().st_size - 20)
    run = tracelab.open_run(tmp_path / "killed")
    assert list(run.loss().index) == list(range(30))
    assert run.problems == []


KILLED_IN_FIRST_WRITE = """
import os, sys, time, pyarrow.ipc
from tracelab.core.writer import RunWriter
real = pyarrow.ipc.RecordBatchStreamWriter.write_batch
def write_batch(self, batch, *args, **kwargs):  # the schema is out, the batch half written
    os._exit(9)
pyarrow.ipc.RecordBatchStreamWriter.write_batch = write_batch
writer = RunWriter(sys.argv[1], flush_interval=60)
writer.write(("scalars", {"step": [0], "split": ["train"], "name": ["loss"], "value": [1.0],
                          "wall_time": [time.time()]}))
writer.flush()
"""


def test_a_kill_inside_the_first_write_leaves_no_unreadable_tail(tmp_path):
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", KILLED_IN_FIRST_WRITE, str(tmp_path / "run")])
    assert done.returncode == 9
    assert not [n for n in os.listdir(tmp_path / "run" / "scalars") if n.endswith(".arrows")]
    run = tracelab.open_run(tmp_path / "run")
    assert run.problems == [] and run.status["state"] == "killed"


def test_corrupt_part_is_skipped_and_reported(tmp_path):
    writer = RunWriter(tmp_path / "run", flush_interval=60, part_rows=10)
    _write_in_chunks(writer, 3, 10)
    writer.close()
    parts = sorted((tmp_path / "run" / "scalars").iterdir())
    assert [p.suffix for p in parts] == [".parquet"] * 3
    parts[1].write_bytes(b"not parquet at all")
    run = tracelab.open_run(tmp_path / "run")
    assert list(run.loss().index) == list(range(10)) + list(range(20, 30))
    assert run.problems == [f"scalars/{parts[1].name}: unreadable (ArrowInvalid), skipped; expected "
                            "a whole Parquet file of this table (it was cut short, damaged or "
                            "written by something else)"]


def test_steps_no_recorder_writes_are_skipped_and_reported(tmp_path, capsys):
    from tracelab.app.cli import main
    writer = RunWriter(tmp_path / "run", flush_interval=60, part_rows=10)
    _write_in_chunks(writer, 2, 10)
    writer.close()
    part = sorted((tmp_path / "run" / "scalars").iterdir())[1]
    table = pq.read_table(part)
    steps = table.column("step").to_numpy().copy()
    steps[:3] = [2 ** 62, -1, 2 ** 63 - 1]  # another writer's rows
    pq.write_table(table.set_column(table.schema.get_field_index("step"), "step",
                                    pa.array(steps)), part)
    run = tracelab.open_run(tmp_path / "run")
    assert list(run.loss().index) == list(range(10)) + list(range(13, 20))
    assert run.problems == [f"scalars/{part.name}: 3 of 10 rows with a step outside 0..2**62 "
                            "skipped"]
    assert main(["analyze", str(tmp_path / "run"), "--no-html", "--fail-on", "never"]) == 0
    assert "steps 0-19" in capsys.readouterr().out


@pytest.mark.parametrize("setup,message", [
    (lambda p: None, "no such directory"),
    (lambda p: p.mkdir(), "not a tracelab run (no meta.json)"),
    (lambda p: (p.mkdir(), (p / "meta.json").write_text("{oops")), "unreadable"),
    (lambda p: (p.mkdir(), (p / "meta.json").write_text(json.dumps({"schema_version": 99}))),
     "schema version 99 is not supported"),
    (lambda p: (p.mkdir(), (p / "meta.json").write_text("[]")), "expected a JSON object"),
])
def test_bad_run_directories_give_one_line_errors(tmp_path, setup, message):
    path = tmp_path / "run"
    setup(path)
    with pytest.raises(TraceError, match=re.escape(message)) as info:
        tracelab.open_run(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_empty_run_is_refused_by_analyze(tmp_path):
    RunWriter(tmp_path / "run").close()
    with pytest.raises(TraceError, match="holds no recorded steps"):
        tracelab.analyze(tmp_path / "run")


def _tail_batches(path):
    with pa.ipc.open_stream(path) as reader:
        return list(reader)


def test_many_small_items_become_one_batch_per_flush(tmp_path):
    writer = RunWriter(tmp_path / "run", flush_interval=60)
    n = FLUSH_ITEMS - 10  # fewer than make the writer flush by count
    for step in range(n):
        # The recorder hands numpy arrays; other callers hand lists. Both may share a flush.
        column = np.array if step % 2 else list
        writer.write(("scalars", {"step": column([step, step]), "split": ["train", "val"],
                                  "name": ["loss", "loss"], "value": column([step, -step]),
                                  "wall_time": column([1.5, 2.5])}))
    assert writer.flush()
    writer.write(("scalars", {"step": [], "value": []}))  # no rows: no batch
    assert writer.flush()
    writer.write(_scalars(n, 0.5))
    assert writer.flush()
    tail = tmp_path / "run" / "scalars" / "r0-000000.arrows"
    batches = _tail_batches(tail)
    assert [b.num_rows for b in batches] == [2 * n, 1]
    first = batches[0].to_pydict()
    assert first["step"] == [s for s in range(n) for _ in range(2)]
    assert first["value"][:6] == [0.0, 0.0, 1.0, -1.0, 2.0, -2.0]
    assert first["split"][:4] == ["train", "val", "train", "val"]
    # A copy of the live directory is what a killed process leaves: every row reads back.
    shutil.copytree(tmp_path / "run", tmp_path / "killed")
    writer.close()
    run = tracelab.open_run(tmp_path / "killed")
    assert list(run.loss().index) == list(range(n + 1)) and run.problems == []
    assert list(tracelab.open_run(tmp_path / "run").loss("val")) == [-s for s in range(n)]


def _tensor_item(step, kind, names, **extra):
    n = len(names)
    cols = {"step": np.full(n, step, dtype=np.int64), "kind": [kind] * n, "name": list(names),
            "numel": np.arange(1, n + 1), "mean": np.linspace(0.0, 1.0, n)}
    cols.update(extra)
    return "tensors", cols


def _written_once(run_dir, table, items):
    """A writer given `items`, flushed once, and the single batch its tail then holds."""
    writer = RunWriter(run_dir, flush_interval=60)
    for item in items:
        writer.write(item)
    assert writer.flush()
    [batch] = _tail_batches(run_dir / table / "r0-000000.arrows")
    return writer, batch


def test_columns_absent_from_some_items_are_null_in_their_rows(tmp_path):
    items = [
        _tensor_item(0, "weight", ["a", "b"]),
        _tensor_item(0, "activation", ["m1", "m2", "m3"],
                     dead_frac=np.array([0.5, np.nan, 0.0]), saturated_frac=[0.1, None, 0.2]),
        _tensor_item(1, "weight", ["a", "b"], nan_count=np.array([3, 4])),
        _tensor_item(1, "activation", ["m1", "m2", "m3"], dead_frac=np.array([0.25, 1.0, 0.75]),
                     saturated_frac=np.array([np.nan, 0.3, 0.4]), mean=[7.0, 8.0, 9.0]),
    ]
    writer, batch = _written_once(tmp_path / "run", "tensors", items)
    got = batch.to_pydict()
    assert got["dead_frac"] == [None, None, 0.5, None, 0.0, None, None, 0.25, 1.0, 0.75]
    assert got["saturated_frac"] == [None, None, 0.1, None, 0.2, None, None, None, 0.3, 0.4]
    assert got["nan_count"] == [None] * 5 + [3, 4] + [None] * 3
    assert got["mean"][-3:] == [7.0, 8.0, 9.0] and got["norm"] == [None] * 10
    assert got["name"] == ["a", "b", "m1", "m2", "m3"] * 2
    # The same rows as converting item by item, which is what the writer did per step.
    expected = pa.Table.from_batches([to_batch(t, cols) for t, cols in items])
    assert pa.Table.from_batches([batch]).equals(expected)
    writer.close()
    tensors = tracelab.open_run(tmp_path / "run").tensors
    assert tensors["dead_frac"].isna().tolist() == [v is None for v in got["dead_frac"]]


def test_datetime_arrays_absent_from_some_items_keep_nat_as_null():
    from tracelab.core.batches import build_batch
    moments = np.array(["2024-05-01T12", "NaT"], dtype="datetime64[ns]")
    items = [(2, {"step": np.array([0, 0]), "time_min": moments}),
             (1, {"step": np.array([1])}),
             (1, {"step": np.array([2]), "time_min": moments[:1]})]
    got = build_batch("inputs", items).column("time_min").to_pylist()
    assert got == [pd.Timestamp(moments[0]), None, None, pd.Timestamp(moments[0])]


def test_list_columns_absent_from_some_items_are_null_in_their_rows(tmp_path):
    # Data-frame inputs carry datetime columns as lists; tensor inputs have none of them.
    moment = pd.Timestamp("2024-05-01 12:00")
    items = [
        ("inputs", {"step": [0, 0], "feature": ["x", "t"], "dtype": ["float32", "datetime64[ns]"],
                    "resolution": [None, "h"], "time_min": [None, moment]}),
        ("inputs", {"step": np.array([1]), "feature": ["x"], "dtype": ["float32"],
                    "mean": np.array([0.5])}),
        ("inputs", {"step": [2], "feature": ["t"], "dtype": ["datetime64[ns]"],
                    "resolution": ["D"], "time_min": [moment]}),
    ]
    writer, batch = _written_once(tmp_path / "run", "inputs", items)
    got = batch.to_pydict()
    assert got["resolution"] == [None, "h", None, "D"]
    assert got["time_min"] == [None, moment, None, moment]
    assert got["mean"] == [None, None, 0.5, None] and got["step"] == [0, 0, 1, 2]
    assert pa.Table.from_batches([batch]).equals(
        pa.Table.from_batches([to_batch(t, cols) for t, cols in items]))
    writer.close()


def test_a_bad_item_warns_once_and_stops_recording(tmp_path):
    writer = RunWriter(tmp_path / "run", flush_interval=60)
    writer.write(_scalars(0, 1.0))
    assert writer.flush()
    with pytest.warns(RuntimeWarning, match="columns of unequal length") as caught:
        writer.write(("scalars", {"step": [1, 2], "value": [1.0]}))
        assert not writer.flush()
        writer.write(_scalars(2, 1.0))
        writer.close()
    assert len(caught) == 1 and writer.failed
    assert list(tracelab.open_run(tmp_path / "run").loss().index) == [0]


def test_a_costly_samples_snapshot_is_rewritten_less_often():
    """The periodic flush rewrites the samples file at most every SAMPLES_INTERVAL, and at most
    once per 1 / SAMPLES_COST_SHARE times the CPU time of its last rewrite."""
    cheap, costly = writer_module.SAMPLES_COST_SHARE * writer_module.SAMPLES_INTERVAL / 2, 0.5
    assert writer_module.samples_due(100.0, cheap) == 100.0 + writer_module.SAMPLES_INTERVAL
    assert writer_module.samples_due(100.0, costly) == \
        pytest.approx(100.0 + costly / writer_module.SAMPLES_COST_SHARE)


@pytest.mark.parametrize("interval", [0.0, 1e9])
def test_the_samples_snapshot_is_rewritten_when_due_and_at_close(tmp_path, monkeypatch, interval):
    """A periodic flush rewrites the snapshot when it is due (the first one always is);
    close() always writes the latest."""
    monkeypatch.setattr(writer_module, "SAMPLES_INTERVAL", interval)
    monkeypatch.setattr(writer_module, "SAMPLES_COST_SHARE", float("inf"))  # its cost: none

    def samples(value):
        return lambda: {"split": ["train"], "feature": ["a"], "step": np.array([0]),
                        "value": np.array([value])}

    def written():
        return pd.read_parquet(tmp_path / "run" / "samples")["value"].tolist()

    writer = RunWriter(tmp_path / "run", {})
    writer.set_samples(samples(1.0))
    assert writer.flush(samples=False) and written() == [1.0]
    writer.set_samples(samples(2.0))
    assert writer.flush(samples=False) and written() == ([2.0] if interval == 0 else [1.0])
    writer.set_samples(samples(3.0))
    writer.close()
    assert written() == [3.0]
