"""pytorch/examples reinforce: REINFORCE on cart-pole, Adam, the episode's loss summed; faulty:
the policy loss written log_prob * R instead of -log_prob * R."""
from _a_reinforce import SOURCE, run as _train

LABEL = {
    "family": "rl",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "wrong-loss-sign",
    "source": SOURCE,
    "bug_source": "https://github.com/ikostrikov/pytorch-a3c/issues/30",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="ascent")
