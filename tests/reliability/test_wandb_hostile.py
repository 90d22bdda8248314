"""Hostile W&B runs: JSON nested 100,000 deep in a config, summary or history value, histogram
bins holding a 400-digit integer, a display name holding NUL. Each value is left out and named
in one line of the run's problems, the rest of the run is read, and no command shows a
traceback; the inputs' bytes are unchanged. The runs are written by the real wandb client
(offline), and the hostile records framed into its file beside the client's own."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("wandb")
pytest.importorskip("google.protobuf")

from _inputs import snapshot  # noqa: E402
from tracelab.app.cli import main  # noqa: E402
from tracelab.recorders.importers import wandb_proto  # noqa: E402
from tracelab.recorders.importers.wandb import read_wandb  # noqa: E402
from tracelab.recorders.importers.wandb_log import read_records  # noqa: E402
from _wandb_framing import frame  # noqa: E402

_CLIENT = textwrap.dedent(r"""
    import sys
    import numpy as np
    import wandb
    root = sys.argv[1]
    for name in ("hostile", "nul\0name"):
        run = wandb.init(project="hostile", name=name, dir=root, config={"lr": 0.01},
                         settings=wandb.Settings(console="off", x_disable_stats=True))
        rng = np.random.default_rng(0)
        for step in range(60):
            row = {"train/loss": 2.0 / (step + 1), "val/acc": 0.5}
            if step % 10 == 9:
                row["gradients/fc.weight"] = wandb.Histogram(rng.standard_normal(100))
            run.log(row, step=step)
        run.finish()
""")
DEEP_LIST = "[" * 100_000 + "]" * 100_000
DEEP_DICT = '{"a":' * 100_000 + "1" + "}" * 100_000
HUGE = "9" * 400


@pytest.fixture(scope="module")
def client_runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("wandb-hostile")
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true",
           "WANDB_DISABLE_GIT": "true", "WANDB_CONSOLE": "off", "NO_PROXY": "*"}
    proc = subprocess.run([sys.executable, "-c", _CLIENT, str(root)], capture_output=True,
                          text=True, env=env, cwd=root, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = {read_wandb(f).meta["name"]: f for f in (root / "wandb").glob("offline-run-*")}
    plain = runs.pop("hostile")
    (nul,) = runs.values()  # named by its run id
    return {"plain": plain, "nul": nul}


def _file(folder: Path) -> Path:
    return next(folder.glob("run-*.wandb"))


def _with_record(client_run: Path, folder: Path, record) -> Path:
    """A copy of the client's run at `folder`, its file holding `record` among its own."""
    shutil.copytree(client_run, folder)
    file = _file(folder)
    records, damage = read_records(file.read_bytes())
    assert damage is None
    file.write_bytes(frame(records[:5] + [record.SerializeToString()] + records[5:]))
    return folder


def _hostile_records() -> dict[str, tuple[object, str]]:
    """{case: (a Record, the problem it must give)}."""
    Record, Item = wandb_proto.record_class(), wandb_proto.item_class()

    def row(step: int, *items) -> object:
        return Record(history={"item": [*items, Item(nested_key=["_step"],
                                                     value_json=str(step))]})

    deep = "JSON nested more than 64 levels deep"
    beyond = "a histogram whose bins or values are not finite numbers in a float's range"
    bins = '{"_type": "histogram", "values": [1, 2, 3], "bins": [0, 1, 2, %s]}' % HUGE
    leaf = ["gradients/fc.weight"]
    return {
        "config": (Record(config={"update": [Item(key="deep", value_json=DEEP_LIST)]}),
                   f"config 'deep': {deep}, left out"),
        "summary": (Record(summary={"update": [Item(key="deep", value_json=DEEP_DICT)]}),
                    f"summary 'deep': {deep}, left out"),
        "history": (row(30, Item(nested_key=["deep"], value_json=DEEP_DICT)),
                    f"history 'deep': {deep} at step 30, left out"),
        "history-leaf": (row(31, Item(nested_key=["deep", "_type"], value_json='"histogram"'),
                             Item(nested_key=["deep", "bins"], value_json=DEEP_LIST)),
                         f"history 'deep.bins': {deep} at step 31, left out"),
        "bins": (row(32, Item(nested_key=leaf, value_json=bins)),
                 f"history 'gradients/fc.weight': {beyond} at step 32, left out"),
        "bins-leaves": (row(33, Item(nested_key=leaf + ["_type"], value_json='"histogram"'),
                            Item(nested_key=leaf + ["values"], value_json="[1, 2, 3]"),
                            Item(nested_key=leaf + ["bins"], value_json=f"[0, 1, 2, {HUGE}]")),
                        f"history 'gradients/fc.weight': {beyond} at step 33, left out"),
    }


@pytest.mark.parametrize("case", list(_hostile_records()))
def test_a_hostile_value_is_left_out_and_named(client_runs, tmp_path, capsys, case):
    record, problem = _hostile_records()[case]
    folder = _with_record(client_runs["plain"], tmp_path / "run", record)
    line = f"{_file(folder).name}: {problem}"
    before = snapshot(folder)
    assert main(["analyze", str(folder), "--no-html", "--fail-on", "never"]) == 0
    out = capsys.readouterr()
    assert f"not read: {line}" in out.out and "Traceback" not in out.err, out
    assert main(["import", "wandb", str(folder), str(tmp_path / "imported")]) == 0
    assert f"not read: {line}" in capsys.readouterr().out
    assert snapshot(folder) == before
    imported = read_wandb(folder)  # the rest of the run, whole
    assert imported.problems == [line]
    assert imported.tables["scalars"].num_rows == 120
    assert imported.tables["tensors"].num_rows == 6  # the client's histograms
    assert imported.meta["config"] == {"lr": 0.01} and imported.meta["name"] == "hostile"


def test_rows_counted_past_int64(client_runs, tmp_path, capsys):
    """A row at History.step 2**63 - 1, then rows without a step (counted on from it) holding
    a loss and a histogram: no step past int64, the rows left out and named."""
    Record, Item = wandb_proto.record_class(), wandb_proto.item_class()
    hist = '{"_type": "histogram", "values": [1], "bins": [0, 1]}'
    folder = tmp_path / "run"
    shutil.copytree(client_runs["plain"], folder)
    file = _file(folder)
    records, _ = read_records(file.read_bytes())
    last = [Record(history={"item": [Item(nested_key=["train/loss"], value_json="1.0")],
                            "step": {"num": 2**63 - 1}}),
            Record(history={"item": [Item(nested_key=["train/loss"], value_json="2.0"),
                                     Item(nested_key=["gradients/x"], value_json=hist)]})]
    file.write_bytes(frame(records + [r.SerializeToString() for r in last]))
    before = snapshot(folder)
    assert main(["analyze", str(folder), "--no-html", "--fail-on", "never"]) == 0
    out = capsys.readouterr()
    assert "not read: metric 'train/loss': 2 rows with a step that is not a whole number" \
        in out.out and "Traceback" not in out.err, out
    assert "not read: tensors: 1 of 7 rows with a step outside 0..2**62 skipped" in out.out
    assert snapshot(folder) == before


def test_a_display_name_holding_nul(client_runs, tmp_path, capsys, monkeypatch):
    """The run is named by its run id, and the name is listed as left out; the report lands
    where it would for any run (named after it, in the working directory)."""
    folder = client_runs["nul"]
    run_id = folder.name.rsplit("-", 1)[1]
    line = f"{_file(folder).name}: display name: holds NUL, left out"
    before = snapshot(folder)
    monkeypatch.chdir(tmp_path)
    assert main(["analyze", str(folder), "--fail-on", "never"]) == 0
    out = capsys.readouterr()
    assert f"not read: {line}" in out.out and "Traceback" not in out.err, out
    assert (tmp_path / f"{run_id}-report.html").is_file()
    assert snapshot(folder) == before
    imported = read_wandb(folder)
    assert imported.meta["name"] == run_id and imported.problems == [line]
    assert imported.tables["scalars"].num_rows == 120


def test_a_batch_over_hostile_runs(client_runs, tmp_path, capsys):
    """Every hostile run in one archive: each analyzed, its problem in runs.parquet."""
    archive = tmp_path / "archive"
    expected = {}
    for case, (record, problem) in _hostile_records().items():
        folder = _with_record(client_runs["plain"], archive / case / "wandb" / "offline-run-x",
                              record)
        expected[case] = f"{_file(folder).name}: {problem}"
    shutil.copytree(client_runs["nul"], archive / "nul" / "wandb" / client_runs["nul"].name)
    expected["nul"] = f"{_file(client_runs['nul']).name}: display name: holds NUL, left out"
    before = snapshot(archive)
    out = tmp_path / "out"
    assert main(["batch", str(archive), "--out", str(out), "--jobs", "1",
                 "--reports", "none"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    assert snapshot(archive) == before
    runs = pq.read_table(out / "runs.parquet").to_pandas()
    assert len(runs) == len(expected)
    for case, line in expected.items():
        row = runs[runs["path"].str.contains(f"/{case}/wandb/")].iloc[0]
        assert list(row["problems"]) == [line], case
        assert row["status"] == "completed" and row["last_step"] == 59, case


def test_without_protobuf_a_wandb_run_is_one_line(client_runs):
    """In a process where the protobuf package cannot be imported (as without the wandb
    extra), analyzing a W&B run is one line naming the package to install."""
    code = ("import sys; sys.modules['google.protobuf'] = None; "  # `import` raises ImportError
            "from tracelab.app.cli import main; sys.exit(main(sys.argv[1:]))")
    before = snapshot(client_runs["plain"])
    proc = subprocess.run([sys.executable, "-c", code, "analyze", str(client_runs["plain"]),
                           "--no-html"], capture_output=True, text=True, timeout=300)
    assert snapshot(client_runs["plain"]) == before
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("tracelab: error: ") and proc.stderr.count("\n") == 1, \
        proc.stderr
    assert "protobuf" in proc.stderr and "pip install 'tracelab[wandb]'" in proc.stderr
