"""facebookresearch/simsiam; faulty: --lr 5.0."""
from _y_simsiam import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'lr-too-high',
    "source": SOURCE,
    "bug_source": 'https://github.com/leftthomas/SimSiam/issues/1',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='lr-5')
