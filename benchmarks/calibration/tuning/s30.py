"""A scenario of the former sealed set (scored once, 2026-12-07; now tuning): README_s.md, SOURCES_s.md."""
from __future__ import annotations

from _s_t17 import train

LABEL = {
    "family": "cnn",
    "optimizer": "adadelta",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "loss-input-contract",
    "source": "https://github.com/Lightning-AI/pytorch-lightning/blob/master/examples/fabric/image_classifier/train_torch.py",
    "bug_source": "https://github.com/yanx27/Pointnet_Pointnet2_pytorch/issues/30",
}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, log_softmax=False)
