"""rasbt/machine-learning-book ch13: Auto MPG regression from a pandas frame, SGD; faulty: the
target column MPG left among the input features."""
from _a_auto_mpg import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "data-leak",
    "source": SOURCE,
    "bug_source": "https://github.com/vinayakumarr/Kalasalingam/issues/2",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="mpg-feature")
