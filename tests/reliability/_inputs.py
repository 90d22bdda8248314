"""Inputs of the adversarial tests, built for real, and a check that they survived."""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from tracelab.core.writer import RunWriter


def as_a_user() -> list[str]:
    """The prefix of a command that file permissions apply to. Root reads everything: its
    commands run through setpriv (util-linux) without the capabilities that let it ignore
    them, still as root, so they read the checkout and interpreter wherever those lie (a clone
    in a `mktemp -d` folder, which another user such as nobody cannot enter)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("needs setpriv to drop root's permission override")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search",
            "--inh-caps=-dac_override,-dac_read_search"]


def write_run(path: Path, steps: int = 120, *, seed: int = 0) -> Path:
    """A completed native run with a train loss, an accuracy and a val loss, as RunWriter
    writes it."""
    rng = np.random.default_rng(seed)
    writer = RunWriter(path, {"config": {"lr": 0.01, "seed": seed}})
    loss = 2.0 * np.exp(-np.arange(steps) / 40) + 0.05 * rng.random(steps)
    for step in range(steps):
        writer.write(("scalars", {"step": [step, step], "split": ["train", "train"],
                                  "name": ["loss", "acc"], "value": [loss[step], 0.5],
                                  "wall_time": [1.0e9 + step, 1.0e9 + step]}))
        if step % 20 == 19:
            writer.write(("scalars", {"step": [step], "split": ["val"], "name": ["loss"],
                                      "value": [loss[step] * 1.1], "wall_time": [1.0e9]}))
    writer.close()
    return path


def write_csv_log(path: Path, steps: int = 80) -> Path:
    lines = ["step,train_loss,val_loss"]
    lines += [f"{s},{1.5 * 0.98 ** s:.5f},{'' if s % 10 else f'{1.6 * 0.98 ** s:.5f}'}"
              for s in range(steps)]
    path.write_text("\n".join(lines) + "\n")
    return path


def snapshot(*roots: Path) -> dict[str, str]:
    """Every file under `roots` (or the file itself) with the sha256 of its bytes."""
    out = {}
    for root in roots:
        files = [root] if root.is_file() else [Path(d) / n for d, _, names in os.walk(root)
                                               for n in names if not (Path(d) / n).is_symlink()]
        for f in files:
            out[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def write_tensorboard_log(path: Path, steps: int = 60) -> Path:
    """A TensorBoard log written by torch's SummaryWriter; returns its event file."""
    from torch.utils.tensorboard import SummaryWriter
    writer = SummaryWriter(str(path))
    for step in range(steps):
        writer.add_scalar("train/loss", 2.0 / (step + 1), step)
    writer.close()
    return next(path.glob("events.out.tfevents.*"))
