"""A scenario of the former sealed set (scored once, 2026-12-07; now tuning): README_s.md, SOURCES_s.md."""
from __future__ import annotations

from _s_t04 import train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "dead-units",
    "source": "https://github.com/yunjey/pytorch-tutorial/blob/master/tutorials/01-basics/feedforward_neural_network/main.py",
    "bug_source": "https://stats.stackexchange.com/questions/450100/understanding-relu-does-this-unlucky-intialized-network-assign-all-instances",
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bias=-1.0)
