"""KevinMusgrave/pytorch-metric-learning TripletMarginLossMNIST: a convolutional embedder
trained with a cosine triplet margin loss on semihard mined triplets, Adam(lr=0.01), as published."""
from _q_pml import SOURCE, run as _train

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
    _train(run_dir, seed, bug=None)
