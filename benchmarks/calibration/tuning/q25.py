"""ShusenTang/Dive-into-DL-PyTorch 3.16 kaggle-house-price; faulty: the features standardized
for the training rows only, the held-out fold fed in raw units."""
from _q_zh import SOURCE_HOUSE as SOURCE, run_house as _train

LABEL = {
    "family": "tabular",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "train-val-preprocessing-mismatch",
    "source": SOURCE,
    "bug_source": "https://github.com/tflearn/tflearn/issues/832",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="val-raw")
