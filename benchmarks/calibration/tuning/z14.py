"""lucidrains/byol-pytorch: BYOL (projector and predictor with BatchNorm, EMA target), Adam, two
augmented views."""
from _z_byol import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
