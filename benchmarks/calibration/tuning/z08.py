"""huggingface/pytorch-image-models train.py with --mixup 0.2 (SoftTargetCrossEntropy): healthy."""
from _z_timm import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="mixup")
