"""KevinMusgrave/pytorch-metric-learning TripletMarginLossMNIST; faulty: Adam(lr=1.0)."""
from _q_pml import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-too-high",
    "source": SOURCE,
    "bug_source": "https://github.com/omoindrot/tensorflow-triplet-loss/issues/18",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="lr-1")
