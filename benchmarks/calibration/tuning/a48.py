"""rasbt/machine-learning-book ch13: Auto MPG regression from a pandas frame, SGD; faulty: the
hidden biases initialized to -2: most ReLU units never fire."""
from _a_auto_mpg import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "dead-units",
    "source": SOURCE,
    "bug_source": "https://github.com/facebookresearch/dlrm/pull/358",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="negative-bias")
