"""dataflowr collaborative filtering (DotModel) on synthetic ratings, Adam, MSE; healthy."""
from _p_cf import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
