"""EmilienDupont/wgan-gp; faulty: the generator's samples detached in its own step, so the generator never trains."""
from _r_wgan import SOURCE, run as _train

LABEL = {
    "family": "gan",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'frozen-by-mistake',
    "source": SOURCE,
    "bug_source": 'https://github.com/nikhilsinghmus/image2reverb/issues/37',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='detach-g')
