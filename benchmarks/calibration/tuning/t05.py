"""jeffheaton t81_558 PyTorch iris classifier, Adam full batch: faulty (as published): nn.Softmax
output given to CrossEntropyLoss."""
from _t_iris import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'loss-input-contract',
    "source": SOURCE,
    "bug_source": 'https://github.com/ariecattan/SciCo/issues/2',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='softmax')
