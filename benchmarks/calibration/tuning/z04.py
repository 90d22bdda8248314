"""ikostrikov/pytorch-a2c-ppo-acktr-gail A2C: MLPBase actor-critic, RMSprop, clip_grad_norm_ 0.5, CartPole."""
from _z_a2c import SOURCE, run as _train

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
    _train(run_dir, seed)
