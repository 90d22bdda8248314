"""d09: bentrevett's seq2seq with gradient accumulation (4 micro-batches of 8, loss / 4)."""
from _d_seq2seq import SOURCE, run as _train

LABEL = {"family": "rnn", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": SOURCE,
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="accum")
