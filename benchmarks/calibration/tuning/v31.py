"""patrickloeber logistic regression; faulty: the StandardScaler left out."""
from _v_ploeber_logreg import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "input-scale",
    "source": SOURCE,
    "bug_source": "https://github.com/torch/demos/pull/6",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="unscaled")
