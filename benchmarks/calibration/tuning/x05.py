"""weiaicunzai/pytorch-cifar100; faulty: the epoch scheduler stepped every batch."""
from _x_cifar100 import SOURCE, run as _train

LABEL = {"family": "cnn", "optimizer": "sgd", "loss_reduction": "mean",
         "healthy": False, "cause": "lr-schedule", "source": SOURCE,
         "bug_source": "https://github.com/ivadomed/ivadomed/pull/55"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="sched-per-batch")
