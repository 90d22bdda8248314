"""spinningup VPG; faulty: the policy loss's minus sign left out."""
from _u_spinup_vpg import SOURCE, run as _train

LABEL = {
    "family": "rl",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "wrong-loss-sign",
    "source": SOURCE,
    "bug_source": "https://github.com/openai/spinningup/issues/436",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="ascent")
