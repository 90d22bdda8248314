"""martinarjovsky WassersteinGAN, MLP critic and generator, RMSprop, weight clipping: faulty: lrD =
lrG a hundred times the default."""
from _t_wgan import SOURCE, run as _train

LABEL = {
    "family": "gan",
    "optimizer": "rmsprop",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'lr-too-high',
    "source": SOURCE,
    "bug_source": 'https://github.com/martinarjovsky/WassersteinGAN/issues/57',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='high-lr')
