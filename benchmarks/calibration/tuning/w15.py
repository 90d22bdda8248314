"""optuna MLP; faulty: Adam given the learning rate tuned for SGD (0.1)."""
from _w_optuna import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-too-high",
    "source": SOURCE,
    "bug_source": "https://github.com/DeepLabCut/DeepLabCut/pull/2393",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="adam-sgd-lr")
