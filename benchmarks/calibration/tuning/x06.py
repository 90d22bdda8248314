"""weiaicunzai/pytorch-cifar100; faulty: net.train() never called again after evaluation."""
from _x_cifar100 import SOURCE, run as _train

LABEL = {"family": "cnn", "optimizer": "sgd", "loss_reduction": "mean",
         "healthy": False, "cause": "train-in-eval-mode", "source": SOURCE,
         "bug_source": "https://github.com/wkentaro/pytorch-fcn/pull/56"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="train-once")
