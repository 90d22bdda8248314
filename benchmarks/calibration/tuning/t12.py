"""facebookresearch moco, MoCo v1 with a queue and momentum key encoder, SGD, InfoNCE cross-entropy:
as published."""
from _t_moco import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
