"""dreamquark-ai/tabnet: TabNet; faulty: the target column left among the feature columns."""
from _z_tabnet import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "data-leak",
    "source": SOURCE,
    "bug_source": "https://github.com/mwaskom/seaborn-data/issues/37",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="target-in-features")
