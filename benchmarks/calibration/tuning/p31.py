"""NYU-DLSP20 sequence classification, LSTM; faulty: one bug from the linked thread."""
from _p_seq import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "rmsprop",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "param-not-in-optimizer",
    "source": SOURCE,
    "bug_source": "https://github.com/ifzhang/FairMOT/issues/125",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="lstm-only-in-optimizer")
