"""sfujim/TD3; faulty: the actor loss without its minus sign."""
from _y_td3 import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "rl",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'wrong-loss-sign',
    "source": SOURCE,
    "bug_source": 'https://github.com/philtabor/Actor-Critic-Methods-Paper-To-Code/issues/2',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='actor-loss-sign')
