"""e06: pytorch/tutorials char_rnn_classification as published (hand-written RNN cell, NLLLoss,
batch of one, manual SGD lr 0.005)."""
from _e_char_rnn import SOURCE, run as _train

LABEL = {"family": "rnn", "optimizer": "manual", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": SOURCE,
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
