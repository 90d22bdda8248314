"""rainbow-is-all-you-need DQN on CartPole; faulty: one bug from the linked thread."""
from _p_dqn import SOURCE, run as _train

LABEL = {
    "family": "rl",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "shape-broadcast",
    "source": SOURCE,
    "bug_source": "https://github.com/hungtuchen/pytorch-dqn/issues/3",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-keepdim")
