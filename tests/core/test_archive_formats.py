"""MLflow, W&B and TensorBoard archives written by the real clients: read, imported, batched,
diffed, and damaged files read as far as they are whole. The clients run in child processes
(tests/core/_archive_clients.py); tracelab reads their files without them."""
from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("mlflow")
pytest.importorskip("wandb")
pytest.importorskip("tensorboard")

from tracelab.app.batch import run_batch  # noqa: E402
from tracelab.app.cli import main  # noqa: E402
from tracelab.app.sources import detect, discover, open_any  # noqa: E402
from tracelab.core.errors import TraceError  # noqa: E402
from tracelab.recorders.importers.mlflow import read_mlflow  # noqa: E402
from tracelab.recorders.importers.wandb import read_wandb  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import _archive_clients as clients  # noqa: E402
from _archive_runs import train_run, tree_state  # noqa: E402
from _wandb_framing import inside_a_record  # noqa: E402


def mlflow_schema_db(path: Path, runs: list[dict]) -> Path:
    """An MLflow SQLite store built with sqlite3 after MLflow's schema (mlflow/store/tracking/
    dbmodels/models.py: experiments, runs, metrics, params, tags). Writing it with mlflow
    itself needs SQLAlchemy and alembic, whose migrations take tens of seconds here; the
    real-client test below does that when they are installed."""
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE experiments (experiment_id INTEGER PRIMARY KEY, name VARCHAR(256),
            artifact_location VARCHAR(256), lifecycle_stage VARCHAR(32), creation_time BIGINT,
            last_update_time BIGINT);
        CREATE TABLE runs (run_uuid VARCHAR(32) PRIMARY KEY, name VARCHAR(250),
            source_type VARCHAR(20), source_name VARCHAR(500), entry_point_name VARCHAR(50),
            user_id VARCHAR(256), status VARCHAR(9), start_time BIGINT, end_time BIGINT,
            source_version VARCHAR(50), lifecycle_stage VARCHAR(20), artifact_uri VARCHAR(200),
            experiment_id INTEGER, deleted_time BIGINT);
        CREATE TABLE metrics (key VARCHAR(250), value FLOAT, timestamp BIGINT,
            run_uuid VARCHAR(32), step BIGINT, is_nan BOOLEAN);
        CREATE TABLE params (key VARCHAR(250), value VARCHAR(8000), run_uuid VARCHAR(32));
        CREATE TABLE tags (key VARCHAR(250), value VARCHAR(8000), run_uuid VARCHAR(32));
        INSERT INTO experiments VALUES (1, 'db', '', 'active', 0, 0);
    """)
    for run in runs:
        rid = run["id"]
        db.execute("INSERT INTO runs VALUES (?, ?, 'LOCAL', '', '', 'me', ?, ?, ?, '', ?, '', 1,"
                   " NULL)", (rid, run["name"], run.get("status", "FINISHED"), 1_700_000_000_000,
                              1_700_000_100_000, run.get("stage", "active")))
        for step, value in enumerate(run["loss"]):
            nan = value != value
            db.execute("INSERT INTO metrics VALUES ('train_loss', ?, ?, ?, ?, ?)",
                       (0.0 if nan else float(value), 1_700_000_000_000 + step, rid, step, nan))
        db.executemany("INSERT INTO params VALUES (?, ?, ?)",
                       [(k, str(v), rid) for k, v in run["params"].items()])
        db.execute("INSERT INTO tags VALUES ('mlflow.runName', ?, ?)", (run["name"], rid))
    db.commit()
    db.close()
    return path


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    """The mixed archive: an MLflow file-store lr sweep, an MLflow database, two W&B offline
    runs, a TensorBoard log and a tracelab run, nested at different depths."""
    root = tmp_path_factory.mktemp("archive") / "archive"
    clients.write("mlflow-files", root / "team-a")
    clients.write("wandb", root / "team-b" / "deep" / "er")
    clients.write("tensorboard", root / "tb")
    (root / "db").mkdir(parents=True)
    mlflow_schema_db(root / "db" / "mlflow.db", [
        {"id": "a" * 32, "name": "db-ok", "loss": clients.healthy_loss(7),
         "params": {"lr": 0.003, "batch_size": 32, "optimizer": "sgd"}},
        {"id": "b" * 32, "name": "db-nan", "loss": [1.0] * 30 + [float("nan")] * 20,
         "status": "FAILED", "params": {"lr": 0.003, "batch_size": 32, "optimizer": "sgd"}},
        {"id": "c" * 32, "name": "db-deleted", "loss": [1.0] * 10, "stage": "deleted",
         "params": {}}])
    train_run(root / "native" / "run1", steps=30, lr=0.01)
    return root


@pytest.fixture(scope="module")
def batch(archive, tmp_path_factory):
    before = tree_state(archive)
    out = tmp_path_factory.mktemp("out") / "triage"
    result = run_batch(archive, out, jobs=1, reports="none", progress=False)
    assert tree_state(archive) == before  # nothing in the archive changed
    runs = pd.read_parquet(out / "runs.parquet")
    runs.attrs["out"] = str(out)
    return result, runs, (out / "index.html").read_text("utf-8")


def test_discovery_finds_every_format_at_any_depth(archive):
    found = discover(archive)
    formats = sorted(s.format for s in found)
    assert formats.count("mlflow") == 6 + 2 and formats.count("wandb") == 2
    assert formats.count("tensorboard") == 1 and formats.count("tracelab") == 1
    assert {s.key for s in found if s.path.suffix == ".db"} == {"a" * 32, "b" * 32}


def test_mlflow_file_store_run(archive):
    run_dir = next(s.path for s in discover(archive / "team-a"))
    run = open_any(run_dir)
    assert run.name.startswith("sweep-lr") and run.meta["source"]["format"] == "mlflow"
    assert run.status["state"] == "completed"
    assert set(run.meta["config"]) == {"lr", "batch_size", "optimizer", "seed"}
    assert isinstance(run.meta["config"]["lr"], float) and run.meta["config"]["batch_size"] == 32
    assert run.loss().index.tolist() == list(range(clients.STEPS))
    assert run.scalar("acc", "val").index.tolist() == list(range(9, clients.STEPS, 10))
    assert run.scalar("lr/0").notna().all()
    assert run.meta["start_time"] < run.meta["end_time"]


def test_mlflow_database_runs(archive):
    db = archive / "db" / "mlflow.db"
    with pytest.raises(TraceError, match="holds 2 MLflow runs"):
        read_mlflow(db)
    run = open_any(f"{db}#db-nan")
    assert run.name == "db-nan" and run.status["state"] == "failed"
    assert run.loss().isna().sum() == 20 and run.meta["config"]["lr"] == 0.003


def test_wandb_offline_run(archive):
    folder = next(s.path for s in discover(archive / "team-b") if "offline-run" in s.path.name)
    imported = read_wandb(folder)
    names = {imported.meta["name"]}
    run = imported.as_run(folder)
    assert names <= {"wb-nan", "wb-ok"} and run.status["state"] == "completed"
    assert run.meta["config"] == {"lr": 0.01, "batch_size": 64, "optimizer": "adam",
                                  "model": {"width": 32}}
    assert run.meta["source"]["exit_code"] == 0
    assert run.meta["source"]["summary"]["best_acc"] == 0.6
    assert run.loss().index.tolist() == list(range(clients.STEPS))
    assert run.scalar("acc", "val").index.tolist() == list(range(9, clients.STEPS, 10))
    assert "epoch" not in set(run.scalars["name"])  # bookkeeping, like _step and _runtime


def test_wandb_histograms_become_gradient_statistics(archive):
    folder = next(s.path for s in discover(archive / "team-b")
                  if read_wandb(s.path).meta["name"] == "wb-ok")
    run = read_wandb(folder).as_run(folder)
    assert run.names("grad") == ["fc1.weight", "fc2.weight"]
    std = run.stat("grad", "std")
    assert std.index.tolist() == list(range(9, clients.STEPS, 10))
    assert std["fc1.weight"].to_numpy() == pytest.approx(0.01, rel=0.15)
    assert std["fc2.weight"].to_numpy() == pytest.approx(0.02, rel=0.15)
    assert (run.stat("grad", "numel") == 500).all().all()
    assert not any(n.startswith("gradients") for n in run.scalars["name"])


def test_tensorboard_tensor_summaries_and_histograms(archive):
    run = open_any(archive / "tb" / "tb-vanishing")
    assert run.loss().index.tolist() == list(range(60))  # every event, no reservoir
    assert run.names("grad") == [f"layers.{i}.weight" for i in range(4)]
    norms = run.stat("grad", "norm").iloc[-1]
    assert norms["layers.0.weight"] < 1e-6 < norms["layers.1.weight"]


def test_batch_diagnoses_each_planted_defect(batch):
    result, runs, _ = batch
    assert result.total == len(runs) == 12 and set(runs["status"]) <= {"completed", "failed"}
    cause = {n: c if isinstance(c, str) else None
             for n, c in zip(runs["source_name"], runs["root_cause_rule"])}
    for lr in (0.3, 0.5, 1.0):
        assert cause[f"sweep-lr{lr}"] == "loss-oscillation"
    for lr in (0.001, 0.003, 0.01):
        assert cause[f"sweep-lr{lr}"] is None
    assert cause["wb-nan"] == "nonfinite-values" and cause["wb-ok"] is None
    assert cause["tb-vanishing"] == "vanishing-gradients"
    assert cause["db-nan"] == "nonfinite-values" and cause["db-ok"] is None
    assert sorted(runs["format"].unique()) == ["mlflow", "tensorboard", "tracelab", "wandb"]


def test_runs_parquet_carries_the_varying_settings(batch):
    _, runs, _ = batch
    assert {"config.lr", "config.optimizer", "config.batch_size"} <= set(runs.columns)
    schema = pq.read_schema(Path(runs.attrs["out"]) / "runs.parquet")
    assert schema.field("config.lr").type == pa.float64()
    assert schema.field("config.optimizer").type == pa.string()
    row = runs.set_index("source_name").loc["wb-ok"]
    assert row["config.lr"] == 0.01 and row["config.optimizer"] == "adam"
    assert '"model.width": 32' in row["settings"]


def test_index_relates_settings_to_root_causes(batch):
    _, _, html = batch
    assert "loss-oscillation in 3 of 3 runs with lr ≥ 0.3, in 0 of" in html
    assert "Counts, not causes" in html
    assert "seed ≥" not in html  # the seed does not separate them
    assert '<dt>TL101</dt><dd>loss-oscillation</dd>' in html  # the legend
    assert 'title="setting lr"' in html


def test_import_and_diff_across_formats(archive, tmp_path, capsys):
    folder = next(s.path for s in discover(archive / "team-b"))
    db = archive / "db" / "mlflow.db"
    assert main(["import", "wandb", str(folder), str(tmp_path / "wb")]) == 0
    assert main(["import", "mlflow", str(db), str(tmp_path / "ml"), "--run-id", "db-ok"]) == 0
    assert detect(tmp_path / "ml").format == "tracelab"
    assert open_any(tmp_path / "ml").meta["source"]["format"] == "mlflow"
    capsys.readouterr()
    assert main(["diff", str(tmp_path / "ml"), str(folder)]) == 0
    out = capsys.readouterr().out
    assert "config.optimizer: 'sgd' → 'adam'" in out and "train/loss" in out


def test_diff_of_two_runs_of_one_database(archive, capsys):
    db = archive / "db" / "mlflow.db"
    assert main(["diff", f"{db}#db-ok", f"{db}#db-nan"]) == 0
    assert "train/loss" in capsys.readouterr().out
    assert main(["diff", f"{db}#db-ok", f"{db}#{'a' * 32}"]) == 2  # the same run twice
    assert "the same run" in capsys.readouterr().err


def test_an_imported_run_keeps_how_its_source_ended_and_what_could_not_be_read(
        archive, tmp_path, capsys):
    """Analyzing the import says what analyzing the log says: a failed run stays failed, a
    killed one killed, with the damage the import skipped."""
    db = archive / "db" / "mlflow.db"
    assert main(["import", "mlflow", str(db), str(tmp_path / "failed"), "--run-id",
                 "db-nan"]) == 0
    assert open_any(tmp_path / "failed").status["state"] == "failed"
    folder = next(s.path for s in discover(archive / "team-b"))
    cut = tmp_path / folder.name
    shutil.copytree(folder, cut)
    file = next(cut.glob("run-*.wandb"))
    data = file.read_bytes()
    file.write_bytes(data[:inside_a_record(data, int(len(data) * 0.6))])
    assert main(["import", "wandb", str(cut), str(tmp_path / "killed")]) == 0
    killed = open_any(tmp_path / "killed")
    assert killed.status["state"] == "killed"
    assert any("the file ends inside a record" in p for p in killed.problems)
    for source, imported in ((f"{db}#db-nan", tmp_path / "failed"), (cut, tmp_path / "killed")):
        capsys.readouterr()
        direct = main(["analyze", str(source), "--no-html"])
        first = capsys.readouterr().out.splitlines()[:2]
        assert main(["analyze", str(imported), "--no-html"]) == direct
        assert capsys.readouterr().out.splitlines()[1:2] == first[1:2]


def test_reports_never_land_among_an_mlflow_or_wandb_runs_data(archive, tmp_path, capsys):
    mlflow_run = next(s.path for s in discover(archive / "team-a"))
    wandb_run = next(s.path for s in discover(archive / "team-b"))
    before = tree_state(archive)
    for target in (mlflow_run / "metrics" / "new", mlflow_run / "params" / "new",
                   mlflow_run / "tags" / "new", wandb_run / "run-zzz.wandb"):
        option = "--json" if "params" in target.parts else "--html"
        assert main(["diff", str(mlflow_run), str(wandb_run), option, str(target)]) == 2
        err = capsys.readouterr().err
        assert "part of the recorded data" in err and err.count("\n") == 1, err
    assert tree_state(archive) == before
    report = tmp_path / "copy"
    shutil.copytree(mlflow_run, report)  # an MLflow run's artifacts may hold a report
    assert main(["diff", str(report), str(wandb_run), "--html",
                 str(report / "artifacts" / "diff.html")]) == 0


def test_an_unreadable_wandb_file_entry_is_listed_not_a_traceback(archive, tmp_path, capsys):
    folder = next(s.path for s in discover(archive / "team-b"))
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    (copy / "run-zzz.wandb").mkdir()
    (copy / "run-gone.wandb").symlink_to(tmp_path / "nowhere")
    assert main(["analyze", str(copy), "--no-html"]) in (0, 1)
    assert "Traceback" not in capsys.readouterr().err
    problems = open_any(copy).problems
    assert any(p.startswith("run-zzz.wandb: unreadable (not a regular file)") for p in problems)
    assert any(p.startswith("run-gone.wandb: unreadable (a link to a file outside its folder)")
               for p in problems)
    assert len(open_any(copy).loss()) == clients.STEPS


def test_a_copy_of_the_run_file_beside_it_is_left_out_not_read_twice(archive, tmp_path,
                                                                      capsys):
    folder = next(s.path for s in discover(archive / "team-b"))
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    own = next(copy.glob("run-*.wandb"))
    shutil.copyfile(own, copy / "run-backup.wandb")
    run = open_any(copy)
    assert len(run.loss()) == clients.STEPS and run.loss().index.is_unique
    assert f"run-backup.wandb: not this folder's run file ({own.name}), left out" in run.problems
    # In a folder not named after either run id, which is the run's is not known: refused.
    other = tmp_path / "two-runs"
    shutil.copytree(copy, other)
    before = tree_state(other)
    assert main(["analyze", str(other), "--no-html"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "2 run-*.wandb files" in err and "run-backup.wandb" in err
    assert tree_state(other) == before
    assert main(["import", "wandb", str(other / "run-backup.wandb"), str(tmp_path / "r")]) == 0
    assert len(open_any(tmp_path / "r").loss()) == clients.STEPS


def test_an_infinite_wall_time_imports_as_a_run_that_reads_back(tmp_path, capsys):
    # TensorBoard's own event writer (SummaryWriter needs torch; this suite runs without it)
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.scalar.summary import scalar_pb
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    log = tmp_path / "log"
    writer = EventFileWriter(str(log))
    for step in range(20):
        value = scalar_pb("train/loss", np.float32(1.0 / (step + 1))).value[0]
        writer.add_event(Event(step=step, wall_time=float("inf") if step == 5 else 1.7e9 + step,
                               summary=Summary(value=[value])))
    writer.close()
    assert main(["import", "tensorboard", str(log), str(tmp_path / "run")]) == 0
    run = open_any(tmp_path / "run")
    assert len(run.loss()) == 20 and run.meta["start_time"] == 1.7e9
    assert main(["analyze", str(tmp_path / "run"), "--no-html"]) in (0, 1)


# -- damaged and odd input ---------------------------------------------------------------------
def test_truncated_wandb_file_is_read_to_its_last_whole_record(archive, tmp_path):
    folder = next(s.path for s in discover(archive / "team-b"))
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    file = next(copy.glob("run-*.wandb"))
    whole = read_wandb(copy).as_run(copy).loss()
    data = file.read_bytes()  # cut inside a record's data, not at a piece header
    file.write_bytes(data[:inside_a_record(data, int(len(data) * 0.6))])
    run = read_wandb(copy).as_run(copy)
    assert 0 < len(run.loss()) < len(whole)
    assert run.loss().equals(whole.iloc[:len(run.loss())])
    assert any("the file ends inside a record" in p for p in run.problems)
    assert run.status["state"] == "killed"  # no exit record: its process never ended it


def test_bad_checksum_in_a_wandb_file(archive, tmp_path, capsys):
    folder = next(s.path for s in discover(archive / "team-b"))
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    file = next(copy.glob("run-*.wandb"))
    data = bytearray(file.read_bytes())
    data[inside_a_record(data, len(data) // 2)] ^= 0xFF
    file.write_bytes(bytes(data))
    before = file.read_bytes()
    assert main(["analyze", str(copy), "--no-html"]) in (0, 1)
    out = capsys.readouterr().out
    assert "part not read" in out
    assert file.read_bytes() == before  # the source is never modified
    assert any("checksum mismatch" in p for p in open_any(copy).problems)


def test_truncated_and_unreadable_metric_files(archive, tmp_path):
    run_dir = next(s.path for s in discover(archive / "team-a"))
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy)
    metric = copy / "metrics" / "train_loss"
    metric.write_bytes(metric.read_bytes()[:-7])  # cut inside the last line
    (copy / "metrics" / "val" / "acc").unlink()
    (copy / "metrics" / "val" / "acc").symlink_to("acc")  # a loop: unreadable, even by root
    run = open_any(copy)
    assert len(run.loss()) == clients.STEPS - 1
    assert any("metrics/train_loss: the file ends inside a line" in p for p in run.problems)
    assert any(p.startswith("metrics/val/acc: unreadable (") for p in run.problems)
    assert "val" not in run.splits() and run.scalar("lr/0").notna().all()
    (copy / "metrics" / "lr").write_bytes(b"1700000000000 0.1 0\nnot a line\n")
    run = open_any(copy)
    assert any("metrics/lr: 1 unreadable line (line 2)" in p for p in run.problems)
    assert run.scalar("lr/0").tolist() == [0.1]


def test_malformed_meta_yaml_is_one_line_and_exit_2(archive, tmp_path, capsys):
    run_dir = next(s.path for s in discover(archive / "team-a"))
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy)
    (copy / "meta.yaml").write_text("run_id: x\n{{{ not yaml\n")
    assert main(["analyze", str(copy), "--no-html"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "meta.yaml: line 2" in err


def test_mlflow_database_written_by_mlflow_itself(tmp_path):
    pytest.importorskip("sqlalchemy")
    pytest.importorskip("alembic")
    clients.write("mlflow-sqlite", tmp_path)
    sources = discover(tmp_path)
    assert len(sources) == 2 and all(s.format == "mlflow" for s in sources)
    run = open_any(f"{tmp_path / 'mlflow.db'}#db-lr0.01")
    assert run.status["state"] == "completed" and run.meta["config"]["lr"] == 0.01
    assert len(run.loss()) == clients.STEPS


def test_an_mlflow_database_in_wal_mode_is_read_without_a_file_written_beside_it(tmp_path):
    folder = tmp_path / "db"
    folder.mkdir()
    path = mlflow_schema_db(folder / "mlflow.db", [
        {"id": "a" * 32, "name": "wal", "loss": clients.healthy_loss(7), "params": {"lr": 0.1}}])
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.close()
    assert sorted(p.name for p in folder.iterdir()) == ["mlflow.db"]
    assert main(["analyze", str(path), "--no-html"]) == 0
    # SQLite makes a -shm file even for a read-only connection to a WAL database.
    assert sorted(p.name for p in folder.iterdir()) == ["mlflow.db"]
    # A writer still holding it open: its last commit is in the -wal file, and is read too.
    writer = sqlite3.connect(path)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("INSERT INTO params VALUES ('extra', '1', ?)", ("a" * 32,))
    writer.commit()
    try:
        before = tree_state(folder)
        assert (folder / "mlflow.db-wal").stat().st_size > 0
        assert main(["import", "mlflow", str(path), str(tmp_path / "run")]) == 0
        assert tree_state(folder) == before
        assert open_any(tmp_path / "run").meta["config"] == {"lr": 0.1, "extra": 1}
    finally:
        writer.close()


def test_a_database_row_without_a_run_id_is_no_run(tmp_path, capsys):
    path = mlflow_schema_db(tmp_path / "mlflow.db", [
        {"id": "a" * 32, "name": "only", "loss": clients.healthy_loss(7), "params": {}}])
    db = sqlite3.connect(path)
    db.execute("INSERT INTO runs (run_uuid, name, lifecycle_stage) VALUES (NULL, 'x', 'active')")
    db.commit()
    db.close()
    assert main(["analyze", str(path), "--no-html"]) == 0
    assert "mlflow.db" in capsys.readouterr().out


def test_a_database_left_mid_transaction_is_read_as_it_was_committed(tmp_path):
    # A writer killed mid-transaction leaves a hot -journal: the pages it holds are the
    # committed ones. Read immutable, the database would show the half-written state.
    path = mlflow_schema_db(tmp_path / "mlflow.db", [
        {"id": "a" * 32, "name": "only", "loss": clients.healthy_loss(7), "params": {}}])
    script = (
        "import os, sqlite3, sys\n"
        "db = sqlite3.connect(sys.argv[1]); db.isolation_level = None\n"
        "db.execute('PRAGMA cache_size=1'); db.execute('BEGIN')\n"
        "db.execute('DELETE FROM metrics')\n"
        "db.executemany('INSERT INTO params VALUES (?, ?, ?)',"
        " [('k%d' % i, 'v' * 200, 'a' * 32) for i in range(3000)])\n"
        "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", script, str(path)], check=True)
    assert (tmp_path / "mlflow.db-journal").stat().st_size > 0
    before = tree_state(tmp_path)
    run = read_mlflow(path).as_run(path)
    assert len(run.loss()) == len(clients.healthy_loss(7)) and run.meta["config"] == {}
    assert tree_state(tmp_path) == before
