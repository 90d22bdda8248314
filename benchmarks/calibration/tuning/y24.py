"""Lornatang/GAN-PyTorch; faulty: discriminator.zero_grad() left out."""
from _y_gan import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "gan",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'missing-zero-grad',
    "source": SOURCE,
    "bug_source": 'https://github.com/LoreGoetschalckx/GANalyze/issues/7',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='no-d-zero-grad')
