"""pytorch/examples reinforce: REINFORCE on cart-pole, Adam, the episode's loss summed; healthy:
the script as published."""
from _a_reinforce import SOURCE, run as _train

LABEL = {
    "family": "rl",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
