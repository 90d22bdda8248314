"""e03: PyTorch-GAN's cgan.py as published (label embeddings, Dropout(0.4) in D, MSELoss least-
squares GAN)."""
from _e_gan import SOURCES, run as _train

LABEL = {"family": "gan", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": SOURCES["cgan"],
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, variant="cgan")
