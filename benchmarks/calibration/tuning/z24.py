"""dreamquark-ai/tabnet: TabNet; faulty: the standardization applied to X_train only, X_valid raw."""
from _z_tabnet import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "train-val-preprocessing-mismatch",
    "source": SOURCE,
    "bug_source": "https://github.com/nttcslab/byol-a/issues/5",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="valid-unscaled")
