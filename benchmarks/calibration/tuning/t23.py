"""Bjarten/early-stopping-pytorch MNIST example: an MLP with dropout, Adam, early stopping: faulty:
validation pixels left at 0-255 while training sees 0-1."""
from _t_early_stop import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'train-val-preprocessing-mismatch',
    "source": SOURCE,
    "bug_source": 'https://github.com/JeasunLok/ResNet-pytorch/issues/1',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='val-raw')
