"""A sealed calibration scenario: see README.md (do not read while tuning rules)."""
from __future__ import annotations

from _t04 import train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-too-high",
    "source": "https://github.com/yunjey/pytorch-tutorial/blob/master/tutorials/01-basics/feedforward_neural_network/main.py",
    "bug_source": "https://github.com/rajveermalviya/language-modeling/issues/3",
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, lr=1.0)
