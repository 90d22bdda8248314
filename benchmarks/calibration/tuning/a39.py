"""rasbt/machine-learning-book ch13: Auto MPG regression from a pandas frame, SGD; faulty: the
feature frame shuffled after the targets were taken."""
from _a_auto_mpg import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "label-corruption",
    "source": SOURCE,
    "bug_source": "https://github.com/udacity/sdc-issue-reports/issues/1326",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="shuffled-frame")
