"""Read a W&B run and an MLflow run of 100,000 history rows against the same data as a native run.

Writes three copies of one history, 50 metrics x 2,000 steps (100,000 values):

- a W&B offline run, logged with the wandb client (WANDB_MODE=offline): one `run.log` per step;
- an MLflow file-store run, logged with mlflow's client (`log_batch`): 50 metric files;
- a tracelab run, written with RunWriter.

Then, alternating them in the same process, times opening each as a Run with its scalars
table loaded (`open_source(...).scalars`: for the logs of other loggers that is the import,
decoding included), best of `--repeat`, and prints the import / native ratios. The target is
3x at most. The compiled W&B decoder (numba) is started first, so `wandb` is read with it;
`wandb-numpy` is the same run read by the numpy decoder (the one where numba is missing, and
the one a process starts with), `wandb-exact` by the reference decoder (`bulk=False`: a
protobuf message per record), which both are tested against. Last, the first read of the W&B
run in a fresh process, with each bulk decoder (best of 3): the compiled one's includes
starting numba (importing it, and its first call, from its disk cache).

    python benchmarks/import_scale.py [--steps N] [--metrics M] [--repeat K] [--keep DIR]
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
read_wandb(sys.argv[1], compiled=sys.argv[2] == "compiled").as_run(sys.argv[1]).scalars
print(imported - started, time.perf_counter() - imported)
"""


def _first_reads(path: Path, repeat: int = 3) -> dict[str, tuple[float, float]]:
    """(import, first read) seconds in a fresh process per decoder, best of `repeat`."""
    best: dict[str, tuple[float, float]] = {}
    for _ in range(repeat):
        for decoder in ("numpy", "compiled"):
            out = subprocess.run([sys.executable, "-c", _FRESH, str(path), decoder],
                                 capture_output=True, text=True, check=True).stdout.split()
            got = (float(out[0]), float(out[1]))
            best[decoder] = min(best.get(decoder, got), got, key=lambda t: t[1])
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--metrics", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--keep", type=Path, help="write the runs here and keep them")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="tracelab-import-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        from tracelab.app.sources import discover, open_source
        if not any(root.glob("wandb/offline-run-*")):
            _client(_WANDB, root, args.steps, args.metrics)
        if not (root / "mlruns").exists():
            _client(_MLFLOW, root, args.steps, args.metrics)
        if not (root / "native").exists():
            _native(root / "native", args.steps, args.metrics)
        from tracelab.recorders.importers.wandb import compiled_decoder, read_wandb
        started = time.perf_counter()
        if compiled_decoder() is None:
            sys.exit("numba is not installed: no compiled W&B decoder")
        start_up = time.perf_counter() - started
        sources = {s.format: s for s in discover(root)}
        readers = {fmt: (lambda s=sources[fmt]: open_source(s))
                   for fmt in ("tracelab", "wandb", "mlflow")}
        wandb_run = sources["wandb"].path
        readers["wandb-numpy"] = lambda: read_wandb(wandb_run, compiled=False).as_run(wandb_run)
        readers["wandb-exact"] = lambda: read_wandb(wandb_run, bulk=False).as_run(wandb_run)
        rows = {}
        best = dict.fromkeys(readers, float("inf"))
        for _ in range(args.repeat):
            for fmt, read in readers.items():  # alternating: load on the machine hits all alike
                started = time.perf_counter()
                rows[fmt] = len(read().scalars)
                best[fmt] = min(best[fmt], time.perf_counter() - started)
        print(f"{args.steps} steps x {args.metrics} metrics; best of {args.repeat}; load average "
              f"{os.getloadavg()[0]:.1f}")
        for fmt, seconds in best.items():
            ratio = seconds / best["tracelab"]
            print(f"  {fmt:<11} {rows[fmt]:>7} rows  {seconds * 1000:8.1f} ms  "
                  f"{ratio:5.2f}x native")
        print(f"numba started (import, kernels from its cache) in {start_up:.2f} s here; "
              "first read of the W&B run in a fresh process (after importing the importer):")
        for decoder, (imports, first) in _first_reads(wandb_run).items():
            print(f"  {decoder:<11} {first * 1000:8.0f} ms  (the import before it: "
                  f"{imports * 1000:.0f} ms)")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
