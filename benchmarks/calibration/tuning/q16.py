"""qfettes/DeepRL-Tutorials DQN: replay memory, a target network and Adam on a cart-pole,
as published."""
from _q_dqn import SOURCE, run as _train

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
