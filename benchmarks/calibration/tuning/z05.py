"""ikostrikov/pytorch-a2c-ppo-acktr-gail A2C; faulty: the entropy bonus added to the loss instead of
subtracted."""
from _z_a2c import SOURCE, run as _train

LABEL = {
    "family": "rl",
    "optimizer": "rmsprop",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "wrong-loss-sign",
    "source": SOURCE,
    "bug_source": "https://github.com/google-deepmind/open_spiel/issues/962",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="entropy-sign")
