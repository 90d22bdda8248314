"""pytorch/examples mnist: a CNN on digits, Adadelta(lr=1.0), StepLR per epoch; faulty: the
training labels shuffled apart from their images."""
from _a_mnist import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adadelta",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "label-corruption",
    "source": SOURCE,
    "bug_source": "https://github.com/udacity/sdc-issue-reports/issues/1326",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="shuffled-labels")
