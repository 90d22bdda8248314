"""pytorch/examples dcgan: a DCGAN on digits, one Adam per network; healthy: the script as
published: two networks, two Adam optimizers."""
from _a_dcgan import SOURCE, run as _train

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
