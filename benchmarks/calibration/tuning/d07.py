"""d07: bentrevett's seq2seq with batches padded batch-first and fed to the sequence-first LSTMs."""
from _d_seq2seq import SOURCE, run as _train

LABEL = {"family": "rnn", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "wrong-batch-axis",
         "source": SOURCE,
         "bug_source": "https://theneuralbase.com/pytorch/learn/intermediate/input-shape-for-rnns-seq-batch-features/"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="batch-first")
