"""pytorch-lr-finder MNIST Net on upsampled digits, SGD(momentum=0.5) at the range test's lr; healthy."""
from _p_lrfinder import SOURCE, run as _train

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
    _train(run_dir, seed)
