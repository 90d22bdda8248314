"""pytorch/examples mnist: a CNN on digits, Adadelta(lr=1.0), StepLR per epoch; healthy: healthy,
with a train-only random shift of up to one pixel."""
from _a_mnist import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adadelta",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="augment")
