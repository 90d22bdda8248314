"""hunkim PyTorchZeroToAll diabetes logistic net; faulty: the held-out rows left unscaled."""
from _u_hunkim_diabetes import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "train-val-preprocessing-mismatch",
    "source": SOURCE,
    "bug_source": "https://github.com/cavalab/srbench/pull/19",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="val-unscaled")
