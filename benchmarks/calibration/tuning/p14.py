"""pytorch-vqvae VQ-VAE on upsampled digits, Adam; healthy."""
from _p_vqvae import SOURCE, run as _train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
