"""uvadlc tutorial 17 SimCLR (ResNet-18, InfoNCE) on augmented digits, AdamW + cosine schedule; healthy."""
from _p_simclr import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
