"""pytorch/examples mnist_rnn: an LSTM reading digits row by row, BatchNorm1d, Adadelta; faulty:
the LSTM built without batch_first=True while batches stay (batch, rows, pixels)."""
from _a_mnist_rnn import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "adadelta",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "wrong-batch-axis",
    "source": SOURCE,
    "bug_source": "https://github.com/pytorch/pytorch/issues/1538",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="seq-first")
