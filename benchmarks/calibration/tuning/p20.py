"""dataflowr collaborative filtering on synthetic ratings; faulty: one bug from the linked thread."""
from _p_cf import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "label-corruption",
    "source": SOURCE,
    "bug_source": "https://github.com/sharajpanwar/CC-WGAN-GP/pull/10",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="shuffle-apart")
