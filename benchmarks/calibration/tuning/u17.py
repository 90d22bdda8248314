"""pytorch/ignite mnist; faulty: the convolutions left with requires_grad=False."""
from _u_ignite_mnist import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "frozen-by-mistake",
    "source": SOURCE,
    "bug_source": "https://github.com/nttcslab/byol-a/issues/7",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="frozen-convs")
