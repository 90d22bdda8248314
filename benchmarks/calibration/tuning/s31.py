"""A scenario of the former sealed set (scored once, 2026-12-07; now tuning): README_s.md, SOURCES_s.md."""
from __future__ import annotations

from _s_t14 import train

LABEL = {
    "family": "rl",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "frozen-by-mistake",
    "source": "https://github.com/seungeunrho/minimalRL/blob/master/actor_critic.py",
    "bug_source": "https://github.com/jsboige/CoursIA/pull/15256",
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, detach_value=True)
