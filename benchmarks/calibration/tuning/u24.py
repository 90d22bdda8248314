"""devnag GAN on a 1-d Gaussian: a discriminator judging whole minibatches, two Adam optimizers, as
published."""
from _u_devnag_gan import SOURCE, run as _train

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
