"""uvadlc tutorial 17 SimCLR on augmented digits; faulty: one bug from the linked thread."""
from _p_simclr import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "optimizer-step-missing",
    "source": SOURCE,
    "bug_source": "https://github.com/tedlasai/learn2refocus/issues/5",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-optimizer-step")
