"""A sealed calibration scenario: see README.md (do not read while tuning rules)."""
from __future__ import annotations

from _t14 import train

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
