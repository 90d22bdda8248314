"""e02: PyTorch-GAN's wgan_gp.py as published (critic loss -mean(real) + mean(fake) + 10 GP,
generator every 5th batch)."""
from _e_gan import SOURCES, run as _train

LABEL = {"family": "gan", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": SOURCES["wgan_gp"],
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, variant="wgan_gp")
