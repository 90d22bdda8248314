"""A sealed calibration scenario: see README.md (do not read while tuning rules)."""
from __future__ import annotations

from _t19 import train

LABEL = {
    "family": "contrastive",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "train-in-eval-mode",
    "source": "https://github.com/sthalles/SimCLR/blob/master/simclr.py",
    "bug_source": "https://github.com/shubhamagarwal92/mmd/issues/14",
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, back_to_train=False)
