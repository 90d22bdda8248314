"""Bjarten/early-stopping-pytorch MNIST example: an MLP with dropout, Adam, early stopping: faulty:
the validation digits drawn from the training rows."""
from _t_early_stop import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'train-val-overlap',
    "source": SOURCE,
    "bug_source": 'https://github.com/andpol5/credit-classifier/issues/1',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='val-from-train')
