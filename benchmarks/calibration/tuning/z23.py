"""huggingface/pytorch-image-models train.py; faulty: validate() without model.eval() (dropout and
batch-statistics BatchNorm during validation)."""
from _z_timm import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "eval-in-train-mode",
    "source": SOURCE,
    "bug_source": "https://github.com/rsommerfeld/trocr/issues/9",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-eval-mode")
