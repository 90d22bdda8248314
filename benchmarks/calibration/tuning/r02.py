"""chenyuntc/pytorch-book Chapter2 LeNet; faulty: a softmax ends forward() before CrossEntropyLoss."""
from _r_pbook_lenet import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'loss-input-contract',
    "source": SOURCE,
    "bug_source": 'https://github.com/illiterate/BertClassifier/issues/2',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='softmax')
