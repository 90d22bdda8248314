"""akamaster/pytorch_resnet_cifar10: resnet20, SGD(0.1, momentum 0.9, wd 1e-4), MultiStepLR per epoch; healthy."""
from _y_resnet import SOURCE as SOURCE, run as _train

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
