"""rasbt/machine-learning-book ch13: Auto MPG regression from a pandas frame, SGD; faulty: years
written 1970-1982 against bucket boundaries 73/76/79: the bucket column is constant."""
from _a_auto_mpg import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "constant-input",
    "source": SOURCE,
    "bug_source": "https://github.com/freqtrade/freqtrade/pull/7374",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="year-four-digits")
