"""NYU-DLSP20 VAE (MLP, BCE sum + KLD) on upsampled digits, Adam; healthy."""
from _p_vae import SOURCE, run as _train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
