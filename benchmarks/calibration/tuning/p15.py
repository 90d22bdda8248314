"""pytorch-vqvae VQ-VAE on upsampled digits; faulty: one bug from the linked thread."""
from _p_vqvae import SOURCE, run as _train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "frozen-by-mistake",
    "source": SOURCE,
    "bug_source": "https://github.com/Biohub/esm/issues/92",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="decode-codes")
