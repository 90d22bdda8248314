"""zergtant/pytorch-handbook 3.3 rnn: an RNN mapping sin to cos over consecutive windows,
Adam, as published."""
from _q_handbook import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
