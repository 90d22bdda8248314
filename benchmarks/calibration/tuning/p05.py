"""dataflowr double-moon GAN, two Adam optimizers; healthy."""
from _p_moons_gan import SOURCE, run as _train

LABEL = {
    "family": "gan",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
