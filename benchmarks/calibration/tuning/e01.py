"""e01: PyTorch-GAN's gan.py as published (BCELoss on a Sigmoid discriminator, generator step
first, two Adam(2e-4, betas (0.5, 0.999)))."""
from _e_gan import SOURCES, run as _train

LABEL = {"family": "gan", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": SOURCES["gan"],
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, variant="gan")
