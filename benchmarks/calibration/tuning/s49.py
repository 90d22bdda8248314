"""A scenario of the former sealed set (scored once, 2026-12-07; now tuning): README_s.md, SOURCES_s.md."""
from __future__ import annotations

from _s_t07 import train

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
