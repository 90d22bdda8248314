"""chenyuntc/pytorch-book Chapter2 LeNet; faulty: SGD lr 0.1 with momentum 0.9, a hundred times the book's."""
from _r_pbook_lenet import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'lr-too-high',
    "source": SOURCE,
    "bug_source": 'https://github.com/Lasagne/Lasagne/issues/765',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='lr-0.1')
