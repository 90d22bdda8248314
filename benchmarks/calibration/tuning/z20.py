"""prakashpandey9/Text-Classification-Pytorch: LSTMClassifier; faulty: the permute to sequence-first left
out, batch-first embeddings fed to nn.LSTM."""
from _z_lstm_text import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "wrong-batch-axis",
    "source": SOURCE,
    "bug_source": "https://github.com/facebookresearch/fairseq/issues/2449",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-permute")
