"""akamaster/pytorch_resnet_cifar10; faulty: MultiStepLR stepped every batch."""
from _y_resnet import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'lr-schedule',
    "source": SOURCE,
    "bug_source": 'https://github.com/pytorch/pytorch/issues/3814',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='sched-per-batch')
