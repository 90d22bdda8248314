"""NYU-DLSP20 sequence classification, LSTM, RMSprop; healthy."""
from _p_seq import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "rmsprop",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
