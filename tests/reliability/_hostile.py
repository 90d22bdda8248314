"""Importers' inputs built by hand, for the hostile-input tests: an MLflow file-store run and
SQLite store, a Lightning CSV log, and the FIFOs and links planted in them."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

RUN_ID = "0123456789abcdef0123456789abcdef"


def mlflow_run(root: Path, steps: int = 30, *, name: str = "sweep-1") -> Path:
    """mlruns/0/<run>/ as MLflow's file store writes it: meta.yaml, metrics, params, tags."""
    experiment = root / "mlruns" / "0"
    run = experiment / RUN_ID
    for folder in ("metrics", "params", "tags"):
        (run / folder).mkdir(parents=True)
    (experiment / "meta.yaml").write_text("experiment_id: '0'\nname: Default\n")
    (run / "meta.yaml").write_text(f"run_id: {RUN_ID}\nrun_name: {name}\nstatus: 3\n"
                                   "start_time: 1700000000000\nend_time: 1700000100000\n")
    (run / "metrics" / "loss").write_text("".join(
        f"{1700000000000 + s} {2.0 / (s + 1)} {s}\n" for s in range(steps)))
    (run / "params" / "lr").write_text("0.01")
    (run / "tags" / "mlflow.runName").write_text(name)
    return run


def mlflow_db(path: Path, steps: int = 30) -> Path:
    """An SQLite store with MLflow's tables (the columns the importer reads) and one run."""
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE experiments (experiment_id INTEGER, name TEXT);
        CREATE TABLE runs (run_uuid TEXT, name TEXT, status TEXT, start_time INTEGER,
                           end_time INTEGER, lifecycle_stage TEXT, experiment_id INTEGER);
        CREATE TABLE metrics (key TEXT, value REAL, timestamp INTEGER, run_uuid TEXT,
                              step INTEGER, is_nan BOOLEAN);
        CREATE TABLE params (key TEXT, value TEXT, run_uuid TEXT);
        CREATE TABLE tags (key TEXT, value TEXT, run_uuid TEXT);
        INSERT INTO experiments VALUES (0, 'Default');
    """)
    db.execute("INSERT INTO runs VALUES (?, 'db-run', 'FINISHED', 1700000000000, "
               "1700000100000, 'active', 0)", (RUN_ID,))
    db.executemany("INSERT INTO metrics VALUES ('loss', ?, ?, ?, ?, 0)",
                   [(2.0 / (s + 1), 1700000000000 + s, RUN_ID, s) for s in range(steps)])
    db.execute("INSERT INTO params VALUES ('lr', '0.01', ?)", (RUN_ID,))
    db.commit()
    db.close()
    return path


def csv_log(folder: Path, steps: int = 30) -> Path:
    """Lightning CSVLogger's version folder: metrics.csv and hparams.yaml."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hparams.yaml").write_text("lr: 0.01\nbatch_size: 32\n")
    log = folder / "metrics.csv"
    log.write_text("step,train_loss\n" + "".join(f"{s},{2.0 / (s + 1)}\n" for s in range(steps)))
    return log


def plant(path: Path, kind: str, outside: Path) -> Path:
    """Replace `path` (or create it) with a FIFO, a link to /dev/zero, or a link to `outside`,
    a file beyond the log's folder."""
    if path.exists() or path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no FIFOs here")
        os.mkfifo(path)
    elif kind == "zero":
        if not os.path.exists("/dev/zero"):
            pytest.skip("no /dev/zero here")
        path.symlink_to("/dev/zero")
    else:
        path.symlink_to(outside)
    return path


def tracelab(*argv: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """The CLI in a child process: one that would block on a FIFO is killed at `timeout` (the
    test then fails on its exit code, never hangs the suite)."""
    try:
        return subprocess.run([sys.executable, "-m", "tracelab", *argv], cwd=cwd,
                              capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "SECRET_FROM_THE_ENVIRONMENT": "hunter2"})
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"tracelab {' '.join(argv)} did not end: it blocked") from exc


def regular_files(*roots: Path) -> dict[str, bytes]:
    """The bytes of every regular file under `roots`, without opening anything else (a FIFO
    would block, a link may lead anywhere)."""
    out = {}
    for root in roots:
        for folder, _, names in os.walk(root):
            for name in names:
                file = Path(folder) / name
                if file.is_symlink() or not file.is_file():
                    continue
                out[str(file)] = file.read_bytes()
    return out
