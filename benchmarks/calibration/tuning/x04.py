"""weiaicunzai/pytorch-cifar100: VGG-BN, SGD with warm-up and MultiStepLR, as published."""
from _x_cifar100 import SOURCE, run as _train

LABEL = {"family": "cnn", "optimizer": "sgd", "loss_reduction": "mean",
         "healthy": True, "cause": None, "source": SOURCE, "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
