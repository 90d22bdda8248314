"""pytorch/examples mnist: a CNN on digits, Adadelta(lr=1.0), StepLR per epoch; faulty: the test
transform lacks Normalize(): validation sees 0-1 pixels, training standardized ones."""
from _a_mnist import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adadelta",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "train-val-preprocessing-mismatch",
    "source": SOURCE,
    "bug_source": "https://datascience.stackexchange.com/questions/75178/is-it-acceptable-not-to-transform-test-data-after-train-data-is-being-fit-tran",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="val-unnormalized")
