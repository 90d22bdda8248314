"""A sealed calibration scenario: see README.md (do not read while tuning rules)."""
from __future__ import annotations

from _t07 import train

LABEL = {
    "family": "lstm",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "train-in-eval-mode",
    "source": "https://github.com/bentrevett/pytorch-seq2seq/blob/main/1%20-%20Sequence%20to%20Sequence%20Learning%20with%20Neural%20Networks.ipynb",
    "bug_source": "https://github.com/pytorch/tutorials/issues/1624",
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, train_mode=False)
