"""prakashpandey9/Text-Classification-Pytorch: LSTMClassifier (frozen embedding table, permute to
sequence-first), cross-entropy, Adam, gradient value clamp 0.1."""
from _z_lstm_text import SOURCE, run as _train

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
    _train(run_dir, seed)
