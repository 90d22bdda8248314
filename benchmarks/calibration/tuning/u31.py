"""hunkim PyTorchZeroToAll diabetes logistic net; faulty: the columns go in unscaled."""
from _u_hunkim_diabetes import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "input-scale",
    "source": SOURCE,
    "bug_source": "https://github.com/keras-team/keras/issues/6260",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="raw-units")
