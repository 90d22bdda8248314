"""A sealed calibration scenario: see README.md (do not read while tuning rules)."""
from __future__ import annotations

from _t20 import train

LABEL = {
    "family": "style-transfer",
    "optimizer": "lbfgs",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "missing-zero-grad",
    "source": "https://github.com/pytorch/tutorials/blob/main/advanced_source/neural_style_tutorial.py",
    "bug_source": "https://github.com/skorch-dev/skorch/issues/636",
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, zero_grad=False)
