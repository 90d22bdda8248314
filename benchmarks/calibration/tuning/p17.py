"""uvadlc tutorial 2 SimpleClassifier on continuous XOR, SGD, BCEWithLogitsLoss; healthy."""
from _p_xor import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
