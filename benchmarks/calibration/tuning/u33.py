"""hunkim PyTorchZeroToAll name classifier: embedding, 2-layer bidirectional GRU over packed
sequences, Adam, as published."""
from _u_hunkim_names import SOURCE, run as _train

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
    _train(run_dir, seed, bug=None)
