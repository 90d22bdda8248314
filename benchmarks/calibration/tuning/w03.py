"""pytorch-beginner CNN; faulty: the images go in as raw 0-255 pixels."""
from _w_beginner_cnn import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "input-scale",
    "source": SOURCE,
    "bug_source": "https://github.com/hill-a/stable-baselines/issues/328",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="raw-pixels")
