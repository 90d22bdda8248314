"""pytorch-beginner VAE; faulty: the KL divergence subtracted from the reconstruction loss."""
from _w_beginner_vae import SOURCE, run as _train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "wrong-loss-sign",
    "source": SOURCE,
    "bug_source": "https://github.com/ssemeniuta/textvae/issues/4",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="kld-sign")
