"""hunkim PyTorchZeroToAll diabetes logistic net: three sigmoid layers, BCELoss, SGD(0.1), as
published."""
from _u_hunkim_diabetes import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
