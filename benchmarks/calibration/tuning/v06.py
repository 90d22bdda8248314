"""aladdinpersson row-by-row LSTM classifier; faulty: Adam at lr 0.1."""
from _v_aladdin_lstm import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-too-high",
    "source": SOURCE,
    "bug_source": "https://github.com/tflearn/tflearn/issues/441",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="lr-0.1")
