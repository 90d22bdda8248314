"""A scenario of the former sealed set (scored once, 2026-12-07; now tuning): README_s.md, SOURCES_s.md."""
from __future__ import annotations

from _s_t15 import train

LABEL = {
    "family": "linear",
    "optimizer": "manual",
    "loss_reduction": "sum",
    "healthy": True,
    "cause": None,
    "source": "https://github.com/pytorch/tutorials/blob/main/beginner_source/examples_nn/polynomial_nn.py",
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed)
