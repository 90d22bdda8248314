"""patrickloeber logistic regression; faulty: sigmoid outputs given to BCEWithLogitsLoss."""
from _v_ploeber_logreg import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "loss-input-contract",
    "source": SOURCE,
    "bug_source": "https://github.com/lopuhin/kaggle-imet-2019/issues/3",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="bce-with-logits")
