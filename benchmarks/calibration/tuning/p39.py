"""pytorch-lr-finder MNIST Net on upsampled digits; faulty: one bug from the linked thread."""
from _p_lrfinder import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "weight-decay-too-high",
    "source": SOURCE,
    "bug_source": "https://coderapp.vercel.app/answer/61651457",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="wd-0.5")
