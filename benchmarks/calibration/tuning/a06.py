"""pytorch/examples mnist: a CNN on digits, Adadelta(lr=1.0), StepLR per epoch; faulty:
StepLR(gamma=0.7) stepped after every batch instead of every epoch."""
from _a_mnist import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adadelta",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-schedule",
    "source": SOURCE,
    "bug_source": "https://github.com/Lornatang/SRGAN-PyTorch/issues/1",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="sched-per-batch")
