"""tkipf/pygcn; faulty: the validation indices include every training node."""
from _y_pygcn import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'train-val-overlap',
    "source": SOURCE,
    "bug_source": 'https://github.com/dhruvramani/C2AE-Multilabel-Classification/issues/7',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='val-from-train')
