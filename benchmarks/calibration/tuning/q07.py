"""ShusenTang/Dive-into-DL-PyTorch 3.16 kaggle-house-price; faulty: the numeric features
left in their raw units."""
from _q_zh import SOURCE_HOUSE as SOURCE, run_house as _train

LABEL = {
    "family": "tabular",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "input-scale",
    "source": SOURCE,
    "bug_source": "https://github.com/ageron/handson-ml3/pull/20",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="raw-features")
