"""A scenario of the former sealed set (scored once, 2026-12-07; now tuning): README_s.md, SOURCES_s.md."""
from __future__ import annotations

from _s_t01 import train

LABEL = {
    "family": "cnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "eval-in-train-mode",
    "source": "https://github.com/yunjey/pytorch-tutorial/blob/master/tutorials/02-intermediate/convolutional_neural_network/main.py",
    "bug_source": "https://discuss.pytorch.org/t/what-does-model-eval-do-for-batchnorm-layer/7146",
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, eval_mode=False)
