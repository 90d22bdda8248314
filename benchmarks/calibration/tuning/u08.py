"""pytorch/ignite mnist; faulty: a hand-written evaluator without model.eval()."""
from _u_ignite_mnist import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "eval-in-train-mode",
    "source": SOURCE,
    "bug_source": "https://github.com/giotto-ai/giotto-deep/issues/40",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-eval")
