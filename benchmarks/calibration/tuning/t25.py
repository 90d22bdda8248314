"""martinarjovsky WassersteinGAN, MLP critic and generator, RMSprop, weight clipping: faulty: the
noise never drawn (normal_ left out), an all-zero generator input."""
from _t_wgan import SOURCE, run as _train

LABEL = {
    "family": "gan",
    "optimizer": "rmsprop",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'constant-input',
    "source": SOURCE,
    "bug_source": 'https://github.com/igul222/improved_wgan_training/issues/24',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='zero-noise')
