"""NYU-DLSP20 VAE on upsampled digits; faulty: one bug from the linked thread."""
from _p_vae import SOURCE, run as _train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "wrong-loss-sign",
    "source": SOURCE,
    "bug_source": "https://github.com/hhb072/IntroVAE/issues/5",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="kld-sign")
