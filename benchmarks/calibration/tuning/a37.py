"""rasbt/machine-learning-book ch13: Auto MPG regression from a pandas frame, SGD; faulty: no
standardization: pounds and cubic inches go in raw."""
from _a_auto_mpg import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "input-scale",
    "source": SOURCE,
    "bug_source": "https://github.com/keras-team/keras/issues/508",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="raw-units")
