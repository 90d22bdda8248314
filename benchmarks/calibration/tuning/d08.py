"""d08: bentrevett's seq2seq with Adam(lr=1e-5)."""
from _d_seq2seq import SOURCE, run as _train

LABEL = {"family": "rnn", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "lr-too-low",
         "source": SOURCE,
         "bug_source": "https://github.com/suriyadeepan/practical_seq2seq/issues/51"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="lr-1e-5")
