"""ikostrikov/pytorch-a2c-ppo-acktr-gail A2C; faulty: RMSprop learning rate 0.1."""
from _z_a2c import SOURCE, run as _train

LABEL = {
    "family": "rl",
    "optimizer": "rmsprop",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-too-high",
    "source": SOURCE,
    "bug_source": "https://github.com/keras-team/keras/pull/6182",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="lr-high")
