"""pytorch/examples mnist_rnn: an LSTM reading digits row by row, BatchNorm1d, Adadelta; healthy:
the script as published."""
from _a_mnist_rnn import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "adadelta",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
