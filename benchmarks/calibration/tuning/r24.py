"""lucidrains/denoising-diffusion-pytorch 1-D Gaussian diffusion with a small Unet1D, Adam, clipping and EMA; healthy."""
from _r_diffusion1d import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
