"""pytorch/examples siamese_network: pairs of digits, a shared encoder, BCELoss; healthy: the
script as published."""
from _a_siamese import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "adadelta",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
