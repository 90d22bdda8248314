"""sksq96/pytorch-vae convolutional VAE; faulty: Adam built over another VAE instance's parameters."""
from _r_vae import SOURCE, run as _train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": 'optimizer-step-missing',
    "source": SOURCE,
    "bug_source": 'https://github.com/sktime/sktime/issues/10990',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='other-instance')
