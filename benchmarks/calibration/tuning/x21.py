"""Spijkervet/SimCLR with NT-Xent and Adam on augmented digit pairs, as published."""
from _x_simclr import SOURCE, run as _train

LABEL = {"family": "contrastive", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": True, "cause": None, "source": SOURCE,
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
