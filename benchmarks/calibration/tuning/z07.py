"""huggingface/pytorch-image-models train.py: ResNet, SGD nesterov, warm-up + cosine per epoch, label
smoothing, train-only shift."""
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
    _train(run_dir, seed)
