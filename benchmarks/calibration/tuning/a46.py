"""rasbt/machine-learning-book ch13: Auto MPG regression from a pandas frame, SGD; healthy:
healthy, with gradient accumulation over 4 micro-batches, each loss divided by 4."""
from _a_auto_mpg import SOURCE, run as _train

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
    _train(run_dir, seed, bug="accumulate")
