"""Real tiny runs for the archive and diff tests, without torch: a numpy MLP trained with SGD and
written through RunWriter the way the Recorder writes it, a killed writer, a TensorBoard log
written with the tensorboard package's own event writer, a Lightning-style CSV log."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import traceback
from pathlib import Path

import numpy as np

from tracelab.core.writer import RunWriter

sys.path.insert(0, str(Path(__file__).parents[1] / "analyzers"))
from _data_frames import input_frames  # noqa: E402

LAYERS = (("0.weight", (16, 8)), ("0.bias", (16,)), ("2.weight", (2, 16)), ("2.bias", (2,)))
FEATURES = [f"feature[{j}]" for j in range(8)]
# What the Recorder finds on a CPU-only machine (recorders/environment.py).
ENVIRONMENT = {"python": "3.11.7", "platform": "Linux-x86_64", "torch": "2.3.0+cpu",
               "cuda_available": False, "cuda": None, "cudnn": None, "devices": [],
               "cudnn_benchmark": False, "cudnn_deterministic": False, "tf32_matmul": False,
               "tf32_cudnn": True, "float32_matmul_precision": "highest",
               "deterministic_algorithms": False, "seed_set": True, "pythonhashseed": None,
               "hostname": "test-host", "argv": ["train.py"]}


def _data(n: int = 256, seed: int = 123) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(seed).standard_normal((n, 8)).astype(np.float32)
    return x, (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)


class _MLP:
    """Linear(8, 16), ReLU, Linear(16, 2) with torch's default initialization, in numpy."""

    def __init__(self, seed: int):
        rng = np.random.default_rng(seed)
        fan_in = {"0": 8, "2": 16}
        self.params = {name: (rng.uniform(-1, 1, shape) / np.sqrt(fan_in[name[0]]))
                       .astype(np.float32) for name, shape in LAYERS}

    def forward(self, x: np.ndarray) -> list[np.ndarray]:
        """The outputs of modules 0, 1 and 2."""
        p = self.params
        h = x @ p["0.weight"].T + p["0.bias"]
        a = np.maximum(h, 0)
        return [h, a, a @ p["2.weight"].T + p["2.bias"]]

    def loss_and_grads(self, x: np.ndarray, y: np.ndarray):
        h, a, out = outs = self.forward(x)
        z = out - out.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        rows = np.arange(len(y))
        d = np.exp(logp)
        d[rows, y] -= 1
        d /= len(y)
        dh = (d @ self.params["2.weight"]) * (h > 0)
        grads = {"0.weight": dh.T @ x, "0.bias": dh.sum(0), "2.weight": d.T @ a,
                 "2.bias": d.sum(0)}
        return float(-logp[rows, y].mean()), grads, outs


def _stats(x: np.ndarray) -> dict[str, float]:
    """The Recorder's statistics of one tensor (recorders/stats.py reference_stats)."""
    v = np.asarray(x, dtype=np.float64).reshape(-1)
    return {"numel": v.size, "mean": v.mean(), "std": v.std(ddof=1), "min": v.min(),
            "max": v.max(), "abs_mean": np.abs(v).mean(), "norm": np.sqrt(v @ v),
            "zero_frac": float(np.mean(v == 0)), "nan_count": 0, "inf_count": 0}


def _rows(step: int, kind: str, named: list[tuple[str, np.ndarray]]) -> dict[str, list]:
    stats = [_stats(t) for _, t in named]
    cols = {k: [s[k] for s in stats] for k in stats[0]}
    if kind == "activation":  # a unit (the last dimension) is dead when never positive
        cols["dead_frac"] = [float(np.mean((t <= 0).all(axis=0))) for _, t in named]
    return {"step": [step] * len(named), "kind": [kind] * len(named),
            "name": [n for n, _ in named], **cols}


def _scalars(step: int, split: str, values: dict[str, float]) -> tuple[str, dict]:
    return ("scalars", {"step": [step] * len(values), "split": [split] * len(values),
                        "name": list(values), "value": [float(v) for v in values.values()],
                        "wall_time": [time.time()] * len(values)})


def _meta(seed: int, lr: float, config: dict | None, environment: dict | None) -> dict:
    return {"config": {"lr": lr, **(config or {})},
            "environment": {**ENVIRONMENT, "seed": seed, **(environment or {})},
            "recorder": {"every": 1, "activation_every": 10, "input_every": 10,
                         "sample_size": 2000},
            "optimizer": {"type": "SGD", "groups": [{"lr": lr, "momentum": 0, "dampening": 0,
                                                     "weight_decay": 0, "nesterov": False,
                                                     "n_params": 4}]},
            "model": {"type": "Sequential",
                      "modules": [{"path": "", "type": "Sequential"},
                                  {"path": "0", "type": "Linear"}, {"path": "1", "type": "ReLU"},
                                  {"path": "2", "type": "Linear"}],
                      "parameters": [{"name": n, "shape": list(s), "dtype": "float32",
                                      "device": "cpu", "requires_grad": True,
                                      "in_optimizer": True} for n, s in LAYERS]},
            "input_devices": {"train:input": "cpu", "val:input": "cpu"}}


def train_run(path: Path, *, seed: int = 0, steps: int = 40, lr: float = 0.05,
              fail_at: int | None = None, config: dict | None = None,
              environment: dict | None = None) -> Path:
    """A tiny MLP trained with SGD and recorded as the Recorder does (every step's weights,
    grads and updates; activations and inputs every 10th step, validation every 10th);
    raises inside the loop at `fail_at`, which the run records as failed."""
    model = _MLP(seed)
    x, y = _data()
    x_val, y_val = _data(64, seed=7)
    writer = RunWriter(path, _meta(seed, lr, config, environment), flush_interval=0.05)
    batches: dict[str, list] = {"train": [], "val": []}
    at: dict[str, list] = {"train": [], "val": []}
    step, last = 0, time.perf_counter()
    try:
        for step in range(steps):
            if step == fail_at:
                raise RuntimeError("CUDA out of memory (simulated)")
            idx = np.arange(step * 32, step * 32 + 32) % len(x)
            loss, grads, outs = model.loss_and_grads(x[idx], y[idx])
            before = {n: p.copy() for n, p in model.params.items()}
            for name, g in grads.items():
                model.params[name] -= np.float32(lr) * g.astype(np.float32)
            now = time.perf_counter()
            values = {"loss": loss, "lr/0": lr, **({"step_time": now - last} if step else {})}
            last = now
            writer.write(_scalars(step, "train", values))
            names = [n for n, _ in LAYERS]
            for kind, tensors in (("weight", model.params), ("grad", grads), ("update", {
                    n: model.params[n] - before[n] for n in names})):
                writer.write(("tensors", _rows(step, kind, [(n, tensors[n]) for n in names])))
            if step % 10 == 0:
                writer.write(("tensors", _rows(step, "activation",
                                               [(str(i), o) for i, o in enumerate(outs)])))
                batches["train"].append(x[idx])
                at["train"].append(step)
            if step % 10 == 9:
                out = model.forward(x_val)[2]
                z = out - out.max(axis=1, keepdims=True)
                val_loss = float(np.mean(np.log(np.exp(z).sum(1)) - z[np.arange(64), y_val]))
                writer.write(_scalars(step, "val", {
                    "loss": val_loss, "acc": float(np.mean(out.argmax(1) == y_val))}))
                batches["val"].append(x_val)
                at["val"].append(step)
        status = {"state": "completed"}
    except RuntimeError as exc:
        if fail_at is None:
            raise
        status = {"state": "failed", "exception_type": type(exc).__name__,
                  "exception_message": str(exc), "traceback": traceback.format_exc(),
                  "step": max(step - 1, 0)}
    frames = input_frames({s: b for s, b in batches.items() if b}, names=FEATURES, seed=seed,
                          step_of=lambda split, i: at[split][i])
    inputs = frames["inputs"].drop(columns=["resolution", "time_min", "time_max"])
    writer.write(("inputs", {c: inputs[c].to_numpy() for c in inputs}))
    writer.set_samples({c: frames["samples"][c].to_numpy() for c in frames["samples"]})
    writer.close(status)
    return path


def killed_run(path: Path) -> Path:
    """A writer SIGKILLed mid-run: meta says running, the process is gone, the beat is old."""
    code = textwrap.dedent(f"""
        import os, signal, time
        from tracelab.core.writer import RunWriter
        w = RunWriter({str(path)!r}, {{"config": {{"lr": 0.1}}}}, flush_interval=0.05)
        w.write(("scalars", {{"step": list(range(20)), "split": ["train"] * 20,
                              "name": ["loss"] * 20, "value": [1.0 / (i + 1) for i in range(20)],
                              "wall_time": [time.time()] * 20}}))
        assert w.flush(samples=False)  # on disk in the open tail, however busy the machine
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr
    old = time.time() - 3600
    for beat in path.glob("heartbeat*"):
        os.utime(beat, (old, old))
    return path


# SummaryWriter.add_histogram's default ("tensorflow") bucket limits.
_LIMITS = [1e-12 * 1.1 ** i for i in range(int(np.log(1e32) / np.log(1.1)) + 1)
           if 1e-12 * 1.1 ** i < 1e20]
_BINS = [-v for v in reversed(_LIMITS)] + [0.0] + _LIMITS


def _histogram(values: np.ndarray):
    """The HistogramProto SummaryWriter.add_histogram writes (torch's make_histogram)."""
    from tensorboard.compat.proto.summary_pb2 import HistogramProto
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    counts, limits = np.histogram(v, bins=_BINS)
    nonzero = np.flatnonzero(counts)
    start, end = int(nonzero[0]), int(nonzero[-1]) + 1
    counts = counts[start - 1:end] if start > 0 else np.concatenate([[0], counts[:end]])
    return HistogramProto(min=v.min(), max=v.max(), num=len(v), sum=v.sum(),
                          sum_squares=v @ v, bucket_limit=limits[start:end + 1].tolist(),
                          bucket=counts.tolist())


def tensorboard_log(path: Path, *, steps: int = 30, seed: int = 0) -> Path:
    """A real tiny training (the MLP with Adam) logged the usual TensorBoard way: scalars and
    the histograms of weights and grads, written with the tensorboard package itself."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    model = _MLP(seed)
    moments = {n: (np.zeros_like(p), np.zeros_like(p)) for n, p in model.params.items()}
    x, y = _data()
    writer = EventFileWriter(str(path))

    def add(step: int, **values) -> None:
        writer.add_event(Event(step=step, wall_time=time.time(), summary=Summary(value=[
            Summary.Value(tag=tag, histo=_histogram(v)) if isinstance(v, np.ndarray)
            else Summary.Value(tag=tag, simple_value=v) for tag, v in values.items()])))

    for step in range(steps):
        idx = np.arange(step * 32, step * 32 + 32) % len(x)
        loss, grads, _ = model.loss_and_grads(x[idx], y[idx])
        for name, g in grads.items():  # Adam, lr 0.01
            m, v = moments[name]
            m[:] = 0.9 * m + 0.1 * g
            v[:] = 0.999 * v + 0.001 * g * g
            model.params[name] -= (0.01 * (m / (1 - 0.9 ** (step + 1)))
                                   / (np.sqrt(v / (1 - 0.999 ** (step + 1))) + 1e-8)
                                   ).astype(np.float32)
        hists = {**{n: p for n, p in model.params.items()},
                 **{f"{n}.grad": g for n, g in grads.items()}}
        add(step, **{"train/loss": loss, "lr-Adam": 0.01}, **hists)
        if step % 10 == 9:
            out = model.forward(x)[2]
            z = out - out.max(axis=1, keepdims=True)
            add(step, **{"val/loss": float(np.mean(np.log(np.exp(z).sum(1))
                                                   - z[np.arange(len(y)), y])),
                         "val/acc": float(np.mean(out.argmax(1) == y))})
    writer.close()
    return path


LIGHTNING_CSV = """epoch,lr-SGD,step,train_loss_epoch,train_loss_step,val_acc_epoch,val_loss
,0.1,0,,,,
0,,0,,1.20,,
0,,1,,1.05,,
0,,2,,0.98,,
0,,2,,,0.55,0.97
0,,2,1.07,,,
1,,3,,0.90,,
1,,4,,0.81,,
1,,5,,0.77,,
1,,5,,,0.68,0.80
1,,5,0.83,,,
"""


def csv_log(folder: Path) -> Path:
    """Lightning CSVLogger's layout: version_N/metrics.csv and hparams.yaml."""
    folder.mkdir(parents=True)
    (folder / "metrics.csv").write_text(LIGHTNING_CSV)
    (folder / "hparams.yaml").write_text("lr: 0.1\nbatch_size: 32\nmodel:\n  width: 16\n")
    return folder / "metrics.csv"


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under root with its size and mtime: to prove nothing was written there."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}
