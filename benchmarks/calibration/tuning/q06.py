"""ShusenTang/Dive-into-DL-PyTorch 3.16 kaggle-house-price: a linear regression on
standardized tabular features with Adam(lr=5), as published."""
from _q_zh import SOURCE_HOUSE as SOURCE, run_house as _train

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
    _train(run_dir, seed, bug=None)
