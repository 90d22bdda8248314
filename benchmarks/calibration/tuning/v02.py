"""nikhilbarhate99 PPO on cart-pole; faulty: the clipped surrogate's minus sign left out."""
from _v_ppo import SOURCE, run as _train

LABEL = {
    "family": "rl",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "wrong-loss-sign",
    "source": SOURCE,
    "bug_source": "https://github.com/openai/baselines/issues/1156",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="ascent")
