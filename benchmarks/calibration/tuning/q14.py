"""facebookresearch/mixup-cifar10: a small ResNet trained with mixup, SGD(lr=0.1,
momentum=0.9, weight_decay=1e-4) and step lr drops, as published."""
from _q_mixup import SOURCE, run as _train

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
