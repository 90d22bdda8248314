"""e05: RL-Adventure's double DQN on CartPole as published (target network, replay buffer, Adam
default lr)."""
from _e_dqn import SOURCE, run as _train

LABEL = {"family": "rl", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": SOURCE,
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
