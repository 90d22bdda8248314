"""zalandoresearch/pytorch-vq-vae: VQ-VAE with the straight-through quantizer, MSE / data_variance + vq loss, Adam(lr=1e-3); healthy."""
from _y_vqvae import SOURCE as SOURCE, run as _train

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
    _train(run_dir, seed, bug=None)
