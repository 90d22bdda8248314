"""d06: bentrevett's seq2seq tutorial 1 as published (teacher forcing 0.5, clip 1.0, Adam default lr)."""
from _d_seq2seq import SOURCE, run as _train

LABEL = {"family": "rnn", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": SOURCE,
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
