"""pytorch/examples mnist_rnn: an LSTM reading digits row by row, BatchNorm1d, Adadelta; faulty:
batch_size 4: BatchNorm1d normalizes over 4 rows."""
from _a_mnist_rnn import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "adadelta",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "batchnorm-small-batch",
    "source": SOURCE,
    "bug_source": "https://github.com/tinghuiz/SfMLearner/issues/30",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="batch-4")
