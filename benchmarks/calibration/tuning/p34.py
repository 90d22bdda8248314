"""pytorch-lr-finder MNIST Net on upsampled digits; faulty: one bug from the linked thread."""
from _p_lrfinder import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "input-scale",
    "source": SOURCE,
    "bug_source": "https://github.com/ZFTurbo/ZF_UNET_224_Pretrained_Model/issues/3",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="raw-pixels")
