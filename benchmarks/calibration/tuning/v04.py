"""aladdinpersson simple CNN; faulty: a softmax before CrossEntropyLoss."""
from _v_aladdin_cnn import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "loss-input-contract",
    "source": SOURCE,
    "bug_source": "https://github.com/NaJaeMin92/pytorch-DANN/issues/7",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="softmax")
