"""qfettes/DeepRL-Tutorials DQN; faulty: the next-state values built without
.unsqueeze(dim=1), a (batch, batch) target broadcast against the (batch, 1) Q(s, a)."""
from _q_dqn import SOURCE, run as _train

LABEL = {
    "family": "rl",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "shape-broadcast",
    "source": SOURCE,
    "bug_source": "https://github.com/BY571/Soft-Actor-Critic-and-Extensions/issues/4",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-unsqueeze")
