"""tkipf/pygcn; faulty: validation read from the training forward, dropout active."""
from _y_pygcn import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'eval-in-train-mode',
    "source": SOURCE,
    "bug_source": 'https://github.com/eecn/Hyperspectral-Classification/issues/21',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='fastmode')
