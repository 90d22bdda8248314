"""EmilienDupont/wgan-gp: WGAN with gradient penalty, two Adam optimizers, five critic steps per generator step; healthy."""
from _r_wgan import SOURCE, run as _train

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
    _train(run_dir, seed, bug=None)
