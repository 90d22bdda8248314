"""A scenario of the former sealed set (scored once, 2026-12-07; now tuning): README_s.md, SOURCES_s.md."""
from __future__ import annotations

from _s_t08 import train

LABEL = {
    "family": "embedding-bag",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": "https://github.com/bentrevett/pytorch-sentiment-analysis/blob/main/legacy/3%20-%20Faster%20Sentiment%20Analysis.ipynb",
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed)
