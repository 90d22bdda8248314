"""zalandoresearch/pytorch-vq-vae; faulty: the decoder's parameters left out of the optimizer."""
from _y_vqvae import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'param-not-in-optimizer',
    "source": SOURCE,
    "bug_source": 'https://github.com/cabralpinto/modular-diffusion/issues/17',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='decoder-not-in-optimizer')
