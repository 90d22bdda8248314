"""Read a W&B run and an MLflow run of 100,000 history rows against the same data as a native run.

Writes three copies of one history, 50 metrics x 2,000 steps (100,000 values):

- a W&B offline run, logged with the wandb client (WANDB_MODE=offline): one `run.log` per step;
- an MLflow file-store run, logged with mlflow's client (`log_batch`): 50 metric files;
- a tracelab run, written with RunWriter.

Then, alternating them in the same process, times opening each as a Run with its scalars
table loaded (`open_source(...).scalars`: for the logs of other loggers that is the import,
decoding included), best of `--repeat`, and prints the import / native ratios, and the CPU
time each took (on a busy machine, nearer what a quiet one takes). The targets:
MLflow 3x the native run at most; W&B, whose records are decoded by protobuf one message at a
time, 1 s at most for the 100,000 values. Last, the first read of the W&B run in a fresh
process (best of 3), after importing the importer.

    python benchmarks/import_scale.py [--steps N] [--metrics M] [--repeat K] [--keep DIR]

`--names 2000,8000,32000,100000` times instead how an import grows with the number of metric
names, each logged at `--steps` steps (3 by default there): a Lightning-style CSV written
directly, an MLflow SQLite store and a W&B offline run (the wandb client, one `run.log` of
every name per step), each imported with `read_*` and opened as a Run (best of `--repeat`).
The time per name x step should stay about flat from one size to the next: the import is
linear (a choice of tags once quadratic in the names took 13 s for 8,000 names and did not
end in 300 s for 100,000).

    python benchmarks/import_scale.py --names 2000,8000,32000,100000 [--repeat K]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

_WANDB = r"""
import os, sys
import numpy as np
import wandb
steps, metrics = int(sys.argv[2]), int(sys.argv[3])
run = wandb.init(project="bench", name="bench", dir=sys.argv[1], config={"lr": 0.01},
                 settings=wandb.Settings(console="off", x_disable_stats=True))
values = np.random.default_rng(0).random((steps, metrics))
for step in range(steps):
    run.log({f"train/m{j}": float(values[step, j]) for j in range(metrics)}, step=step)
run.finish()
"""

_MLFLOW = r"""
import sys, time
import numpy as np
import mlflow
from mlflow.entities import Metric
steps, metrics = int(sys.argv[2]), int(sys.argv[3])
client = mlflow.MlflowClient(f"file://{sys.argv[1]}/mlruns")
run = client.create_run(client.create_experiment("bench"), run_name="bench")
values = np.random.default_rng(0).random((steps, metrics))
now = int(time.time() * 1000)
rows = [Metric(f"train/m{j}", float(values[s, j]), now + s, s)
        for s in range(steps) for j in range(metrics)]
for start in range(0, len(rows), 1000):
    client.log_batch(run.info.run_id, metrics=rows[start:start + 1000])
client.set_terminated(run.info.run_id)
"""


def _client(code: str, root: Path, steps: int, metrics: int) -> None:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true",
           "MLFLOW_ALLOW_FILE_STORE": "true"}
    proc = subprocess.run([sys.executable, "-c", code, str(root), str(steps), str(metrics)],
                          env=env, cwd=root, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(proc.stderr[-2000:])


def _native(path: Path, steps: int, metrics: int) -> None:
    from tracelab.core.writer import RunWriter
    values = np.random.default_rng(0).random((steps, metrics))
    writer = RunWriter(path, {"config": {"lr": 0.01}}, flush_interval=3600)
    n = steps * metrics
    writer.write(("scalars", {"step": np.repeat(np.arange(steps), metrics),
                              "split": np.array(["train"] * n, dtype=object),
                              "name": np.array([f"m{j}" for j in range(metrics)] * steps,
                                               dtype=object),
                              "value": values.reshape(-1), "wall_time": np.full(n, time.time())}))
    writer.close({"state": "completed"})


_FRESH = r"""
import sys, time
started = time.perf_counter()
from tracelab.recorders.importers.wandb import read_wandb
imported = time.perf_counter()
read_wandb(sys.argv[1]).as_run(sys.argv[1]).scalars
print(imported - started, time.perf_counter() - imported)
"""


def _first_read(path: Path, repeat: int = 3) -> tuple[float, float]:
    """(import, first read) seconds in a fresh process, the best first read of `repeat`."""
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", _FRESH, str(path)],
                             capture_output=True, text=True, check=True).stdout.split()
        runs.append((float(out[0]), float(out[1])))
    return min(runs, key=lambda t: t[1])


_WANDB_NAMES = r"""
import sys
import numpy as np
import wandb
steps, names = int(sys.argv[2]), int(sys.argv[3])
run = wandb.init(project="bench", name="names", dir=sys.argv[1],
                 settings=wandb.Settings(console="off", x_disable_stats=True))
values = np.random.default_rng(0).random((steps, names)).round(3)
for step in range(steps):
    run.log({f"train/m{j}": float(values[step, j]) for j in range(names)}, step=step)
run.finish()
"""


def _names_csv(path: Path, steps: int, names: int) -> Path:
    values = np.random.default_rng(0).random((steps, names))
    path.write_text("step," + ",".join(f"train/m{j}" for j in range(names)) + "\n" + "".join(
        f"{s}," + ",".join(f"{v:.3f}" for v in values[s]) + "\n" for s in range(steps)))
    return path


def _names_db(path: Path, steps: int, names: int) -> Path:
    import sqlite3
    values = np.random.default_rng(0).random((steps, names))
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE experiments (experiment_id INTEGER, name TEXT);
        CREATE TABLE runs (run_uuid TEXT, name TEXT, status TEXT, start_time INTEGER,
                           end_time INTEGER, lifecycle_stage TEXT, experiment_id INTEGER);
        CREATE TABLE metrics (key TEXT, value REAL, timestamp INTEGER, run_uuid TEXT,
                              step INTEGER, is_nan BOOLEAN);
        CREATE TABLE params (key TEXT, value TEXT, run_uuid TEXT);
        CREATE TABLE tags (key TEXT, value TEXT, run_uuid TEXT);
        INSERT INTO runs VALUES ('r', 'names', 'FINISHED', 0, 1000, 'active', 0);
    """)
    db.executemany("INSERT INTO metrics VALUES (?, ?, ?, 'r', ?, 0)",
                   ((f"train/m{j}", float(values[s, j]), 1000 * s, s)
                    for s in range(steps) for j in range(names)))
    db.commit()
    db.close()
    return path


def names_series(sizes: list[int], steps: int, repeat: int, root: Path) -> None:
    """Import time against the number of metric names (see the module docstring)."""
    from tracelab.recorders.importers.csv import read_csv_log
    from tracelab.recorders.importers.mlflow import read_mlflow
    from tracelab.recorders.importers.wandb import read_wandb
    print(f"names x {steps} steps; best of {repeat}; load average {os.getloadavg()[0]:.1f}")
    for names in sizes:
        folder = root / f"names-{names}"
        folder.mkdir(exist_ok=True)
        inputs = {"csv": (_names_csv(folder / "metrics.csv", steps, names), read_csv_log),
                  "mlflow.db": (_names_db(folder / "mlflow.db", steps, names), read_mlflow)}
        _client(_WANDB_NAMES, folder, steps, names)
        inputs["wandb"] = (next(folder.glob("wandb/offline-run-*")), read_wandb)
        for fmt, (path, read) in inputs.items():
            best = float("inf")
            for _ in range(repeat):
                started = time.perf_counter()
                rows = len(read(path).as_run(path).scalars)
                best = min(best, time.perf_counter() - started)
            size = sum(f.stat().st_size for f in ([path] if path.is_file() else path.iterdir()))
            print(f"  {names:>7,} names  {fmt:<9} {size / 1e6:6.1f} MB  {rows:>8,} rows  "
                  f"{best:7.2f} s  {best / (names * steps) * 1e6:6.1f} us per name x step",
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", help="comma-separated numbers of metric names: time the "
                                        "import against them instead")
    parser.add_argument("--steps", type=int, default=None, help="2000, or 3 with --names")
    parser.add_argument("--metrics", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--keep", type=Path, help="write the runs here and keep them")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="tracelab-import-"))
    root.mkdir(parents=True, exist_ok=True)
    if args.names:
        try:
            names_series([int(n) for n in args.names.split(",")], args.steps or 3,
                         args.repeat, root)
        finally:
            if args.keep is None:
                shutil.rmtree(root, ignore_errors=True)
        return
    args.steps = args.steps or 2000
    try:
        from tracelab.app.sources import discover, open_source
        if not any(root.glob("wandb/offline-run-*")):
            _client(_WANDB, root, args.steps, args.metrics)
        if not (root / "mlruns").exists():
            _client(_MLFLOW, root, args.steps, args.metrics)
        if not (root / "native").exists():
            _native(root / "native", args.steps, args.metrics)
        sources = {s.format: s for s in discover(root)}
        readers = {fmt: (lambda s=sources[fmt]: open_source(s))
                   for fmt in ("tracelab", "wandb", "mlflow")}
        rows = {}
        best = dict.fromkeys(readers, float("inf"))
        cpu = dict.fromkeys(readers, float("inf"))  # what a quiet machine's wall time nears
        for _ in range(args.repeat):
            for fmt, read in readers.items():  # alternating: load on the machine hits all alike
                started, started_cpu = time.perf_counter(), time.process_time()
                rows[fmt] = len(read().scalars)
                best[fmt] = min(best[fmt], time.perf_counter() - started)
                cpu[fmt] = min(cpu[fmt], time.process_time() - started_cpu)
        print(f"{args.steps} steps x {args.metrics} metrics; best of {args.repeat}; load average "
              f"{os.getloadavg()[0]:.1f}")
        for fmt, seconds in best.items():
            ratio = seconds / best["tracelab"]
            print(f"  {fmt:<11} {rows[fmt]:>7} rows  {seconds * 1000:8.1f} ms  "
                  f"{ratio:5.2f}x native  (CPU {cpu[fmt] * 1000:.1f} ms)")
        taken = best["wandb"]
        print(f"W&B: {rows['wandb']:,} values in {taken:.3f} s, {cpu['wandb']:.3f} s of CPU "
              f"(target: 1 s at most: {'met' if taken <= 1.0 else 'MISSED'})")
        imports, first = _first_read(sources["wandb"].path)
        print(f"first read of the W&B run in a fresh process: {first * 1000:.0f} ms (the "
              f"import before it: {imports * 1000:.0f} ms)")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
