"""ShangtongZhang/DeepRL A2C on CartPole, RMSprop, gradient clipping 0.5; healthy."""
from _r_a2c import SOURCE, run as _train

LABEL = {
    "family": "rl",
    "optimizer": "rmsprop",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
