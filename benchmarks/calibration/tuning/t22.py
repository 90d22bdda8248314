"""martinarjovsky WassersteinGAN, MLP critic and generator, weight clipping: healthy, with the
script's --adam option."""
from _t_wgan import SOURCE, run as _train

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
    _train(run_dir, seed, bug='adam')
