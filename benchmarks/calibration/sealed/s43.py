"""A sealed calibration scenario: see README.md (do not read while tuning rules)."""
from __future__ import annotations

from _t06 import train

LABEL = {
    "family": "transformer",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": "https://github.com/karpathy/nanoGPT/blob/master/train.py",
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed)
