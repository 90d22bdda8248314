"""pranz24 pytorch-soft-actor-critic, SAC with twin Q, tanh-Gaussian policy and entropy tuning,
three Adams: faulty: the tanh correction takes the log of 1 - action^2 on the rescaled action."""
from _t_sac import SOURCE, run as _train

LABEL = {
    "family": "rl",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'nonfinite-values',
    "source": SOURCE,
    "bug_source": 'https://github.com/cpnota/autonomous-learning-library/issues/139',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='log-scaled-action')
