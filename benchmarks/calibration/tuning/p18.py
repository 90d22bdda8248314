"""uvadlc tutorial 2 SimpleClassifier on continuous XOR; faulty: one bug from the linked thread."""
from _p_xor import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "loss-input-contract",
    "source": SOURCE,
    "bug_source": "https://github.com/Turoad/lanedet/issues/32",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="sigmoid-out")
