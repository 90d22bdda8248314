"""rainbow-is-all-you-need DQN on CartPole, Adam, smooth L1; healthy."""
from _p_dqn import SOURCE, run as _train

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
    _train(run_dir, seed)
