"""A scenario of the former sealed set (scored once, 2026-12-07; now tuning): README_s.md, SOURCES_s.md."""
from __future__ import annotations

from _s_t18 import train

LABEL = {
    "family": "tabular",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "label-corruption",
    "source": "https://github.com/yandex-research/rtdl",
    "bug_source": "https://github.com/dennybritz/cnn-text-classification-tf/issues/136",
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, shuffle_labels=True)
