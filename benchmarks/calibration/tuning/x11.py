"""p-christ DQN on CartPole; faulty: Adam's learning rate 100 times the config's."""
from _x_dqn import SOURCE, run as _train

LABEL = {"family": "rl", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "lr-too-high", "source": SOURCE,
         "bug_source": "https://github.com/muupan/dqn-in-the-caffe/issues/6"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="lr")
