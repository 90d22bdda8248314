"""hunkim PyTorchZeroToAll name classifier (bidirectional GRU over packed sequences); faulty: names
sorted by length but their targets left in the original order."""
from _u_hunkim_names import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "label-corruption",
    "source": SOURCE,
    "bug_source": "https://github.com/pytorch/pytorch/issues/2615",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="targets-unsorted")
