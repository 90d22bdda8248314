"""A scenario of the former sealed set (scored once, 2026-12-07; now tuning): README_s.md, SOURCES_s.md."""
from __future__ import annotations

from _s_t13 import train

LABEL = {
    "family": "rl",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "wrong-loss-sign",
    "source": "https://github.com/seungeunrho/minimalRL/blob/master/REINFORCE.py",
    "bug_source": "https://datascience.stackexchange.com/questions/57114/understanding-reinforce-loss",
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, sign=1.0)
