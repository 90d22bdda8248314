"""pytorch/examples regression: a polynomial fit with a hand-written SGD update; healthy: the
script as published (a fixed number of batches)."""
from _a_regression import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "manual",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
