"""A scenario of the former sealed set (scored once, 2026-12-07; now tuning): README_s.md, SOURCES_s.md."""
from __future__ import annotations

from _s_t05 import train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-too-low",
    "source": "https://github.com/kuangliu/pytorch-cifar/blob/master/main.py",
    "bug_source": "https://github.com/OpenLMLab/LOMO/issues/50",
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, lr=1e-4)
