"""jeffheaton t81_558 PyTorch iris classifier, full batch: healthy, the notebook's commented-out
SGD(lr=0.01), with logits into CrossEntropyLoss."""
from _t_iris import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='sgd')
