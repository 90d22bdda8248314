"""pytorch-lr-finder MNIST Net on upsampled digits; faulty: one bug from the linked thread."""
from _p_lrfinder import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-too-high",
    "source": SOURCE,
    "bug_source": "https://github.com/facebookresearch/grid-feats-vqa/issues/26",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="lr-at-divergence")
