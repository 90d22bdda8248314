"""Real tiny runs for the archive tests: Recorder runs, a killed writer, TensorBoard, CSV."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import torch
from torch import nn

import tracelab


def _data(n: int = 256, seed: int = 123):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    return x, y


def train_run(path: Path, *, seed: int = 0, steps: int = 40, lr: float = 0.05,
              fail_at: int | None = None, config: dict | None = None) -> Path:
    """A tiny MLP trained with SGD and recorded; raises inside the loop at `fail_at`."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = _data()
    x_val, y_val = _data(64, seed=7)
    loss_fn = nn.CrossEntropyLoss()
    try:
        with tracelab.Recorder(str(path), model=model, optimizer=opt, flush_interval=0.05,
                               config={"lr": lr, **(config or {})}) as rec:
            for step in range(steps):
                if step == fail_at:
                    raise RuntimeError("CUDA out of memory (simulated)")
                idx = torch.arange(step * 32, step * 32 + 32) % len(x)
                opt.zero_grad()
                loss = loss_fn(model(x[idx]), y[idx])
                loss.backward()
                opt.step()
                rec.step(loss=loss, inputs=x[idx])
                if step % 10 == 9:
                    with torch.no_grad():
                        out = model(x_val)
                        rec.log("val", metrics={"loss": loss_fn(out, y_val),
                                                "acc": (out.argmax(1) == y_val).float().mean()},
                                inputs=x_val)
    except RuntimeError:
        if fail_at is None:
            raise
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
        time.sleep(0.4)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr
    old = time.time() - 3600
    for beat in path.glob("heartbeat*"):
        os.utime(beat, (old, old))
    return path


def tensorboard_log(path: Path, *, steps: int = 30, seed: int = 0) -> Path:
    """A real tiny training logged the usual TensorBoard way, histograms included."""
    from torch.utils.tensorboard import SummaryWriter
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = _data()
    loss_fn = nn.CrossEntropyLoss()
    writer = SummaryWriter(str(path))
    for step in range(steps):
        idx = torch.arange(step * 32, step * 32 + 32) % len(x)
        opt.zero_grad()
        loss = loss_fn(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        writer.add_scalar("train/loss", loss.item(), step)
        writer.add_scalar("lr-Adam", 0.01, step)
        for name, p in model.named_parameters():
            writer.add_histogram(name, p.detach(), step)
            writer.add_histogram(f"{name}.grad", p.grad.detach(), step)
        if step % 10 == 9:
            with torch.no_grad():
                out = model(x)
                writer.add_scalar("val/loss", loss_fn(out, y).item(), step)
                writer.add_scalar("val/acc", (out.argmax(1) == y).float().mean().item(), step)
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

