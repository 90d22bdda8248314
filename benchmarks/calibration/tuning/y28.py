"""manujosephv/pytorch_tabular covertype example; faulty: the target column listed among the continuous features."""
from _y_tabular import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'data-leak',
    "source": SOURCE,
    "bug_source": 'https://github.com/PriorLabs/TabPFN/pull/1012',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='target-in-features')
