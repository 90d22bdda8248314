"""optuna MLP; faulty: the validation loader is built on the training set."""
from _w_optuna import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "rmsprop",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "train-val-overlap",
    "source": SOURCE,
    "bug_source": "https://github.com/kawine/dataset_difficulty/issues/7",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="val-on-train")
