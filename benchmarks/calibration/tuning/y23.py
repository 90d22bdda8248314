"""Lornatang/GAN-PyTorch: fully connected GAN, BCELoss, two Adam(lr=2e-4, betas=(0.5, 0.999)); healthy."""
from _y_gan import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "gan",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
