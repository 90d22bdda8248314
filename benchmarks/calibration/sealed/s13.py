"""A sealed calibration scenario: see README.md (do not read while tuning rules)."""
from __future__ import annotations

from _t09 import train

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
