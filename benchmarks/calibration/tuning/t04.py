"""jeffheaton t81_558 PyTorch iris classifier, Adam full batch: logits into CrossEntropyLoss (the
notebook's softmax removed)."""
from _t_iris import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
