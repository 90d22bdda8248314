"""pytorch/examples mnist: a CNN on digits, Adadelta(lr=1.0), StepLR per epoch; faulty: test()
without model.eval(): validation with dropout active."""
from _a_mnist import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adadelta",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "eval-in-train-mode",
    "source": SOURCE,
    "bug_source": "https://github.com/nshaud/DeepHyperX/issues/51",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-eval")
