"""sfujim/TD3: twin critics, target smoothing, delayed actor updates, two Adam(lr=3e-4), on a small point-mass task; healthy."""
from _y_td3 import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "rl",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
