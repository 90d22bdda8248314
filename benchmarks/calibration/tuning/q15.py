"""facebookresearch/mixup-cifar10; faulty: weight_decay set to 5e-4 * batch_size."""
from _q_mixup import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "weight-decay-too-high",
    "source": SOURCE,
    "bug_source": "https://github.com/davidcpage/cifar10-fast/issues/9",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="wd-times-batch")
