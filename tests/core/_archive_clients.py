"""Archives written by the real clients: mlflow (file store and SQLite), wandb in offline mode
and tensorboard's own summary writer, each run in a child process so that neither client's
global state (active runs, the wandb service) leaks into the tests.

    python _archive_clients.py mlflow-files ROOT   an lr sweep: lr >= 0.3 oscillates
    python _archive_clients.py mlflow-sqlite ROOT  ROOT/mlflow.db with two healthy runs
    python _archive_clients.py wandb ROOT          wb-nan (NaN loss from step 60), wb-ok (with
                                                   gradient histograms, as wandb.watch logs)
    python _archive_clients.py tensorboard ROOT    vanishing gradients in histograms

The series are synthetic (a decaying loss with noise, or the planted defect); what is under
test is reading what the clients write.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

STEPS = 120
SWEEP = (0.001, 0.003, 0.01, 0.3, 0.5, 1.0)  # lr >= 0.3: an oscillating loss


def healthy_loss(seed: int, steps: int = STEPS) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(steps)
    return 2.0 * np.exp(-t / 30) + 0.1 + 0.01 * rng.standard_normal(steps)


def oscillating_loss(seed: int, steps: int = STEPS) -> np.ndarray:
    """Learning at first, then bouncing between 0.4 and 1.6 from step 60 on."""
    rng = np.random.default_rng(seed)
    loss = healthy_loss(seed, steps)
    t = np.arange(60, steps)
    loss[60:] = 1.0 + 0.6 * (-1.0) ** t + 0.05 * rng.standard_normal(len(t))
    return loss


def loss_for(lr: float, seed: int) -> np.ndarray:
    return oscillating_loss(seed) if lr >= 0.3 else healthy_loss(seed)


def _mlflow_files(root: Path) -> None:
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    _mlflow(f"file://{root / 'mlruns'}", SWEEP, "sweep")


def _mlflow(uri: str, lrs, experiment: str) -> None:
    import mlflow
    from mlflow.entities import Metric, Param
    client = mlflow.MlflowClient(uri)
    exp = client.create_experiment(experiment)
    for i, lr in enumerate(lrs):
        run = client.create_run(exp, run_name=f"{experiment}-lr{lr}")
        loss = loss_for(lr, i)
        now = 1_700_000_000_000
        metrics = [Metric("train_loss", float(v), now + s, s) for s, v in enumerate(loss)]
        metrics += [Metric("val/acc", float(0.5 + s / 1000), now + s, s)
                    for s in range(9, STEPS, 10)]
        metrics += [Metric("lr", lr, now + s, s) for s in range(STEPS)]
        for start in range(0, len(metrics), 900):
            client.log_batch(run.info.run_id, metrics=metrics[start:start + 900])
        client.log_batch(run.info.run_id, params=[
            Param("lr", str(lr)), Param("batch_size", "32"), Param("optimizer", "sgd"),
            Param("seed", str(i % 2))])
        client.set_terminated(run.info.run_id, "FINISHED")


def _mlflow_sqlite(root: Path) -> None:
    _mlflow(f"sqlite:///{root / 'mlflow.db'}", (0.01, 0.003), "db")


def _wandb(root: Path) -> None:
    os.environ.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DISABLE_GIT="true",
                      WANDB_CONSOLE="off")
    import wandb
    for name, seed in (("wb-nan", 1), ("wb-ok", 2)):
        run = wandb.init(project="archive", name=name, dir=str(root),
                         config={"lr": 0.01, "batch_size": 64, "optimizer": "adam",
                                 "model": {"width": 32}},
                         settings=wandb.Settings(console="off", x_disable_stats=True))
        loss = healthy_loss(seed)
        if name == "wb-nan":
            loss[60:] = np.nan
        for step, value in enumerate(loss):
            row = {"train/loss": float(value), "lr": 0.01, "epoch": step // 40}
            if step % 10 == 9:
                row["val/acc"] = 0.6
                if name == "wb-ok":  # what wandb.watch logs: histograms of the gradients
                    rng = np.random.default_rng(step)
                    row["gradients/fc1.weight"] = wandb.Histogram(rng.standard_normal(500) * 0.01)
                    row["gradients/fc2.weight"] = wandb.Histogram(rng.standard_normal(500) * 0.02)
            run.log(row, step=step)
        run.summary["best_acc"] = 0.6
        run.finish()


def _tensorboard(root: Path) -> None:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.plugins.histogram.summary import histogram_pb
    from tensorboard.plugins.scalar.summary import scalar_pb
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    rng = np.random.default_rng(0)
    writer = EventFileWriter(str(root / "tb-vanishing"))
    scales = {"layers.0.weight": 1e-10, "layers.1.weight": 1e-3, "layers.2.weight": 2e-3,
              "layers.3.weight": 1e-3}
    for step, loss in enumerate(healthy_loss(5, 60)):
        values = [scalar_pb("train/loss", np.float32(loss)).value[0],
                  scalar_pb("lr-Adam", np.float32(1e-3)).value[0]]
        for name, scale in scales.items():
            grad = scale * rng.standard_normal((16, 16))
            values.append(histogram_pb(f"grads/{name}", grad).value[0])
            values.append(histogram_pb(f"weights/{name}", rng.standard_normal((16, 16)) * 0.1
                                       ).value[0])
        from tensorboard.compat.proto.summary_pb2 import Summary
        writer.add_event(Event(step=step, wall_time=1_700_000_000.0 + step,
                               summary=Summary(value=values)))
    writer.close()


WRITERS = {"mlflow-files": _mlflow_files, "mlflow-sqlite": _mlflow_sqlite, "wandb": _wandb,
           "tensorboard": _tensorboard}


def write(kind: str, root: Path) -> Path:
    """Write one client's part of an archive under `root`, in a child process."""
    root.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true",
           "MLFLOW_ALLOW_FILE_STORE": "true", "NO_PROXY": "*"}
    proc = subprocess.run([sys.executable, __file__, kind, str(root)], capture_output=True,
                          text=True, env=env, cwd=root, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root


if __name__ == "__main__":
    WRITERS[sys.argv[1]](Path(sys.argv[2]))
