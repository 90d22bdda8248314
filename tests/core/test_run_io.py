"""The run writer and reader: crash recovery, corrupt parts, bad directories."""
import json
import re
import os
import shutil
import time

import pytest

import tracelab
from tracelab.errors import TraceError
from tracelab.writer import RunWriter


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


def test_corrupt_part_is_skipped_and_reported(tmp_path):
    writer = RunWriter(tmp_path / "run", flush_interval=60, part_rows=10)
    _write_in_chunks(writer, 3, 10)
    writer.close()
    parts = sorted((tmp_path / "run" / "scalars").iterdir())
    assert [p.suffix for p in parts] == [".parquet"] * 3
    parts[1].write_bytes(b"not parquet at all")
    run = tracelab.open_run(tmp_path / "run")
    assert list(run.loss().index) == list(range(10)) + list(range(20, 30))
    assert run.problems == [f"scalars/{parts[1].name}: unreadable (ArrowInvalid)"]


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
