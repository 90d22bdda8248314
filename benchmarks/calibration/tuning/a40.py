"""rasbt/machine-learning-book ch13: Auto MPG regression from a pandas frame, SGD; healthy:
healthy, split by model year (train to 1979, test 1980-82)."""
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
    _train(run_dir, seed, bug="chronological")
