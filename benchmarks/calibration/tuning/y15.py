"""akamaster/pytorch_resnet_cifar10; faulty: weight_decay=0.1."""
from _y_resnet import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'weight-decay-too-high',
    "source": SOURCE,
    "bug_source": 'https://github.com/vlfeat/matconvnet/issues/1051',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='wd-1e-1')
