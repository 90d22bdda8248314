"""A scenario of the former sealed set (scored once, 2026-12-07; now tuning): README_s.md, SOURCES_s.md."""
from __future__ import annotations

from _s_t20 import train

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
