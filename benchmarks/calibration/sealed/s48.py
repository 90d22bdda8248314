"""A sealed calibration scenario: see README.md (do not read while tuning rules)."""
from __future__ import annotations

from _t16 import train

LABEL = {
    "family": "transformer",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "wrong-batch-axis",
    "source": "https://github.com/pytorch/tutorials/blob/main/beginner_source/transformer_tutorial.py",
    "bug_source": "https://github.com/Exorust/TorchLeet/issues/5",
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, batch_first_data=True)
