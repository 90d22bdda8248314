"""mrdbourke/pytorch-deep-learning 02 classification; faulty: optimizer.zero_grad() left out."""
from _y_circles import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'missing-zero-grad',
    "source": SOURCE,
    "bug_source": 'https://github.com/pytorch/pytorch/issues/47175',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='no-zero-grad')
