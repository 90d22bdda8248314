"""pranz24 pytorch-soft-actor-critic, SAC with twin Q, tanh-Gaussian policy and entropy tuning,
three Adams: faulty: the reward batch left 1-D, the critic's target broadcast to (N, N)."""
from _t_sac import SOURCE, run as _train

LABEL = {
    "family": "rl",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'shape-broadcast',
    "source": SOURCE,
    "bug_source": 'https://github.com/sunwuzhou03/reinforcement-learning-lab/issues/1',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='reward-1d')
