"""huggingface/pytorch-image-models train.py; faulty: the epoch cosine scheduler stepped with the update
count after every batch."""
from _z_timm import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-schedule",
    "source": SOURCE,
    "bug_source": "https://github.com/pytorch/tutorials/pull/640",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="step-per-update")
