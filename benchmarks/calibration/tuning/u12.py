"""pytorch/ignite mnist; faulty: the optimizer's parameter groups leave fc2 out."""
from _u_ignite_mnist import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "param-not-in-optimizer",
    "source": SOURCE,
    "bug_source": "https://github.com/zjunlp/HVPNeT/issues/5",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="fc2-left-out")
