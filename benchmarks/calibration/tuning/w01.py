"""pytorch-beginner CNN: conv/pool, linear layers, CrossEntropyLoss, plain SGD, as published."""
from _w_beginner_cnn import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
