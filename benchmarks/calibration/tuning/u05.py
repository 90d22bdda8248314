"""pytorch/ignite mnist; faulty: softmax instead of log_softmax before nll_loss."""
from _u_ignite_mnist import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "loss-input-contract",
    "source": SOURCE,
    "bug_source": "https://github.com/AnubhavGupta3377/Text-Classification-Models-Pytorch/issues/9",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="softmax")
