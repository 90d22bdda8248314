"""prakashpandey9/Text-Classification-Pytorch: LSTMClassifier; faulty: Adam given the script's
learning_rate 2e-5."""
from _z_lstm_text import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-too-low",
    "source": SOURCE,
    "bug_source": "https://github.com/littlepai/Unofficial-Zhihu-API/issues/5",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="lr-2e-5")
