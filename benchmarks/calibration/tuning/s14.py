"""A scenario of the former sealed set (scored once, 2026-12-07; now tuning): README_s.md, SOURCES_s.md."""
from __future__ import annotations

from _s_t18 import train

LABEL = {
    "family": "tabular",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "input-scale",
    "source": "https://github.com/yandex-research/rtdl",
    "bug_source": "https://github.com/jaredleekatzman/DeepSurv/issues/14",
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, name='breast_cancer', standardize=False)
