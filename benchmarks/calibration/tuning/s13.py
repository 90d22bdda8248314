"""A scenario of the former sealed set (scored once, 2026-12-07; now tuning): README_s.md, SOURCES_s.md."""
from __future__ import annotations

from _s_t09 import train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "wrong-loss-sign",
    "source": "https://github.com/AntixK/PyTorch-VAE/blob/master/models/vanilla_vae.py",
    "bug_source": "https://github.com/wiseodd/generative-models/issues/43",
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, kld_sign=1.0)
