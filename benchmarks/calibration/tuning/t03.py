"""Bjarten/early-stopping-pytorch MNIST example: an MLP with dropout, Adam, early stopping; faulty:
validation without model.eval()."""
from _t_early_stop import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'eval-in-train-mode',
    "source": SOURCE,
    "bug_source": 'https://github.com/IBM/pytorch-seq2seq/issues/33',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='no-eval')
