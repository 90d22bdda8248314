"""A sealed calibration scenario: see README.md (do not read while tuning rules)."""
from __future__ import annotations

from _t10 import train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": True,
    "cause": None,
    "source": "https://github.com/yunjey/pytorch-tutorial/blob/master/tutorials/03-advanced/variational_autoencoder/main.py",
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed)
