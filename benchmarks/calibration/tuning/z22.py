"""huggingface/pytorch-image-models train.py with --grad-accum-steps 2 --clip-grad 1.0: healthy."""
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
    _train(run_dir, seed, bug="accum-clip")
