"""pranz24 pytorch-soft-actor-critic, SAC with twin Q, tanh-Gaussian policy and entropy tuning,
three Adams: as published."""
from _t_sac import SOURCE, run as _train

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
    _train(run_dir, seed, bug=None)
