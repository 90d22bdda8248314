"""zergtant/pytorch-handbook 3.3 rnn; faulty: the RNN built without batch_first=True
while its input stays (batch, time, feature)."""
from _q_handbook import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "wrong-batch-axis",
    "source": SOURCE,
    "bug_source": "https://github.com/yunjey/pytorch-tutorial/issues/196",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-batch-first")
