"""The reader on distributed runs: per-rank shards and metadata merged, with a rank column."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from tracelab.core.errors import TraceError
from tracelab.core.run import Run, open_run
from tracelab.core.schema import GRAD, SCALARS, SCHEMA_VERSION, TENSORS
from tracelab.core.writer import RunWriter


def _write_rank(path, rank, losses, *, grad_norm=1.0, status=None, start=0):
    w = RunWriter(path, rank=rank, flush_interval=0.05)
    steps = list(range(start, start + len(losses)))
    w.write((SCALARS, {"step": steps, "split": ["train"] * len(steps),
                       "name": ["loss"] * len(steps), "value": list(losses),
                       "wall_time": [0.0] * len(steps)}))
    w.write((TENSORS, {"step": steps, "kind": [GRAD] * len(steps),
                       "name": ["fc.weight"] * len(steps), "numel": [4] * len(steps),
                       "norm": [grad_norm] * len(steps)}))
    w.close(status)


def test_two_ranks_merge_with_rank_column(tmp_path):
    _write_rank(tmp_path, 0, [1.0, 2.0, 3.0], grad_norm=1.0)
    _write_rank(tmp_path, 1, [3.0, 4.0, 5.0], grad_norm=9.0)
    run = open_run(tmp_path)
    assert run.ranks == [0, 1]
    assert set(run.rank_meta) == {0, 1} and run.rank_meta[1]["rank"] == 1
    for table in (run.scalars, run.tensors, run.inputs, run.samples):
        assert "rank" in table
    assert sorted(run.scalars["rank"].tolist()) == [0, 0, 0, 1, 1, 1]
    # Scalars: the mean over ranks (the global batch); tensor stats: the lowest rank.
    assert run.loss().tolist() == [2.0, 3.0, 4.0]
    assert run.stat(GRAD, "norm")["fc.weight"].tolist() == [1.0, 1.0, 1.0]
    assert run.status["state"] == "completed"
    assert run.status["ranks"] == {0: "completed", 1: "completed"}
    summary = run.summary()
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]
    assert summary["ranks"][1] == {"rank": 1, "status": "completed", "steps": [0, 2]}


def test_single_rank_run_is_unchanged(tmp_path):
    _write_rank(tmp_path, 0, [1.0, 2.0])
    run = open_run(tmp_path)
    assert run.ranks == [0]
    assert "rank" not in run.scalars
    assert run.status == {"state": "completed"}
    assert "ranks" not in run.summary()


def test_ranks_sort_numerically(tmp_path):
    # "r10-..." sorts before "r2-..." as text; the views must still pick rank 2 as the lowest.
    _write_rank(tmp_path, 10, [5.0], grad_norm=10.0)
    _write_rank(tmp_path, 2, [1.0], grad_norm=2.0)
    run = open_run(tmp_path)
    assert run.ranks == [2, 10]
    assert run.stat(GRAD, "norm")["fc.weight"].tolist() == [2.0]
    assert run.problems == ["meta.json: missing; run metadata taken from rank 2"]


def test_rank_that_dies_leaves_the_others_readable(killed):
    tmp_path = killed["r1_5"]
    _write_rank(tmp_path, 0, [1.0] * 8)
    run = open_run(tmp_path)
    status = run.status
    assert status["state"] == "killed" and status["rank"] == 1
    assert status["last_step"] == 4
    assert status["ranks"] == {0: "completed", 1: "killed"}
    assert run.rank_status(0) == run.rank_meta[0]["status"]
    sc = run.scalars
    assert sc.loc[sc["rank"] == 0, "value"].tolist() == [1.0] * 8
    assert sc.loc[sc["rank"] == 1, "value"].tolist() == [10.0, 11.0, 12.0, 13.0, 14.0]
    assert run.summary()["ranks"][1]["steps"] == [0, 4]
    assert run.problems == []


def test_failed_rank_decides_the_status(tmp_path):
    _write_rank(tmp_path, 0, [1.0, 1.0])
    _write_rank(tmp_path, 1, [1.0], status={"state": "failed", "exception_type": "ValueError",
                                            "exception_message": "bad batch", "step": 0})
    status = open_run(tmp_path).status
    assert status["state"] == "failed" and status["rank"] == 1
    assert status["exception_message"] == "bad batch"


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """Run directories, each holding one rank that was killed mid-run (no close, no atexit):
    only what its writer flushed is left. One process kills them all, to keep the tests fast."""
    dirs = {name: tmp_path_factory.mktemp(name) for name in ("r1_5", "r1_3", "r0_3")}
    code = textwrap.dedent(f"""
        import os
        from tracelab.core.writer import RunWriter
        for path, rank, steps in [({str(dirs["r1_5"])!r}, 1, 5), ({str(dirs["r1_3"])!r}, 1, 3),
                                  ({str(dirs["r0_3"])!r}, 0, 3)]:
            w = RunWriter(path, rank=rank, flush_interval=60)
            for step in range(steps):
                w.write(("scalars", {{"step": [step], "split": ["train"], "name": ["loss"],
                                     "value": [10.0 + step], "wall_time": [0.0]}}))
            w.flush()
        os._exit(1)
    """)
    subprocess.run([sys.executable, "-c", code], timeout=60)
    return dirs


def test_killed_rank_is_the_cause_when_the_others_fail_in_a_collective(killed):
    tmp_path = killed["r1_3"]
    _write_rank(tmp_path, 0, [1.0] * 5, status={
        "state": "failed", "exception_type": "RuntimeError",
        "exception_message": "[gloo/transport/tcp/pair.cc:534] Connection closed by peer"})
    status = open_run(tmp_path).status
    assert (status["state"], status["rank"]) == ("killed", 1)
    assert status["ranks"] == {0: "failed", 1: "killed"}


def test_raising_rank_is_the_cause_when_the_others_are_killed(killed):
    tmp_path = killed["r0_3"]
    _write_rank(tmp_path, 1, [1.0], status={"state": "failed", "exception_type": "ValueError",
                                            "exception_message": "bad batch"})
    status = open_run(tmp_path).status
    assert (status["state"], status["rank"]) == ("failed", 1)
    assert status["ranks"] == {0: "killed", 1: "failed"}


def test_first_of_two_failures_wins(tmp_path):
    _write_rank(tmp_path, 2, [1.0], status={"state": "failed", "exception_type": "KeyError",
                                            "exception_message": "'label'"})
    _write_rank(tmp_path, 1, [1.0], status={"state": "failed", "exception_type": "ValueError",
                                            "exception_message": "later"})
    status = open_run(tmp_path).status
    assert (status["rank"], status["exception_type"]) == (2, "KeyError")


def test_missing_rank0_meta_still_opens(tmp_path):
    _write_rank(tmp_path, 0, [1.0, 2.0])
    _write_rank(tmp_path, 1, [3.0, 4.0])
    (tmp_path / "meta.json").unlink()
    run = open_run(tmp_path)
    assert run.meta["rank"] == 1
    assert run.problems == ["meta.json: missing; run metadata taken from rank 1"]
    # Rank 0's data is still there; its state is unknown without its metadata.
    assert run.ranks == [0, 1] and len(run.scalars) == 4
    assert run.status["ranks"] == {0: "unknown", 1: "completed"}
    assert run.status["state"] == "completed"


def test_unreadable_rank_meta_is_a_problem_not_an_error(tmp_path):
    _write_rank(tmp_path, 0, [1.0])
    _write_rank(tmp_path, 1, [2.0])
    (tmp_path / "meta.rank1.json").write_text("{ truncated")
    run = open_run(tmp_path)
    assert run.problems == ["meta.rank1.json: unreadable, rank 1 metadata skipped"]
    assert run.ranks == [0, 1] and len(run.scalars) == 2


def test_newer_schema_on_any_rank_refuses_the_run(tmp_path):
    _write_rank(tmp_path, 0, [1.0])
    _write_rank(tmp_path, 1, [2.0])
    meta = json.loads((tmp_path / "meta.rank1.json").read_text())
    meta["schema_version"] = SCHEMA_VERSION + 1
    (tmp_path / "meta.rank1.json").write_text(json.dumps(meta))
    with pytest.raises(TraceError, match="meta.rank1.json: schema version"):
        open_run(tmp_path)


def test_no_meta_at_all_is_not_a_run(tmp_path):
    (tmp_path / "scalars").mkdir()
    with pytest.raises(TraceError, match=r"not a tracelab run \(no meta.json\)"):
        open_run(tmp_path)


def test_in_memory_ranks_from_frames():
    sc = pd.DataFrame({"step": [0, 0, 1, 1], "split": "train", "name": "loss",
                       "value": [1.0, 3.0, 2.0, 6.0], "rank": [0, 1, 0, 1]})
    run = Run.from_frames(scalars=sc)
    assert run.ranks == [0, 1]
    assert run.loss().tolist() == [2.0, 4.0]
    assert "rank" in run.tensors
    assert run.status["ranks"] == {0: "completed", 1: "completed"}
