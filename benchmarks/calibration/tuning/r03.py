"""chenyuntc/pytorch-book Chapter2 LeNet; faulty: optimizer.zero_grad() once per epoch instead of per batch."""
from _r_pbook_lenet import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'missing-zero-grad',
    "source": SOURCE,
    "bug_source": 'https://github.com/salesforce/corr_based_prediction/issues/1',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='zero-grad-per-epoch')
