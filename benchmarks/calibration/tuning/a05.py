"""pytorch/examples mnist: a CNN on digits, Adadelta(lr=1.0), StepLR per epoch; faulty:
optimizer.zero_grad() left out of the batch loop."""
from _a_mnist import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adadelta",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "missing-zero-grad",
    "source": SOURCE,
    "bug_source": "https://github.com/fchollet/deep-learning-with-python-notebooks/issues/293",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-zero-grad")
