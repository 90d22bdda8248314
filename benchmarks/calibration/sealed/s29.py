"""A sealed calibration scenario: see README.md (do not read while tuning rules)."""
from __future__ import annotations

from _t12 import train

LABEL = {
    "family": "gan",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": "https://github.com/eriklindernoren/PyTorch-GAN/blob/master/implementations/dcgan/dcgan.py",
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed)
