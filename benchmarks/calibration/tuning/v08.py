"""yashu-seth tabular network; faulty: the validation rows left unscaled."""
from _v_tabular import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "train-val-preprocessing-mismatch",
    "source": SOURCE,
    "bug_source": "https://github.com/krishnanlab/PyGenePlexus/issues/364",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="val-unscaled")
