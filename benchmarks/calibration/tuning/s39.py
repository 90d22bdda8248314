"""A scenario of the former sealed set (scored once, 2026-12-07; now tuning): README_s.md, SOURCES_s.md."""
from __future__ import annotations

from _s_t17 import train

LABEL = {
    "family": "cnn",
    "optimizer": "adadelta",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "optimizer-step-missing",
    "source": "https://github.com/Lightning-AI/pytorch-lightning/blob/master/examples/fabric/image_classifier/train_torch.py",
    "bug_source": "https://discuss.pytorch.org/t/what-step-backward-and-zero-grad-do/33301",
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, step_first=True)
