"""rasbt/machine-learning-book ch13: Auto MPG regression from a pandas frame, SGD; faulty: the
test frame left unstandardized."""
from _a_auto_mpg import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "train-val-preprocessing-mismatch",
    "source": SOURCE,
    "bug_source": "https://datascience.stackexchange.com/questions/75178/is-it-acceptable-not-to-transform-test-data-after-train-data-is-being-fit-tran",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="test-unnormalized")
