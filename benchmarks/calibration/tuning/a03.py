"""pytorch/examples mnist: a CNN on digits, Adadelta(lr=1.0), StepLR per epoch; faulty: pixels go
in as 0-255, neither divided by 255 nor normalized."""
from _a_mnist import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adadelta",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "input-scale",
    "source": SOURCE,
    "bug_source": "https://github.com/chainer/chainercv/issues/358",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="raw-pixels")
