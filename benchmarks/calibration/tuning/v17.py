"""aladdinpersson row-by-row classifier with the script's GRU, healthy."""
from _v_aladdin_lstm import SOURCE, run as _train

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
    _train(run_dir, seed, bug="gru")
