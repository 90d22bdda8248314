"""huggingface/pytorch-image-models train.py; faulty: model.train() missing from train_one_epoch(), so
training after the first validate() runs in eval mode."""
from _z_timm import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "train-in-eval-mode",
    "source": SOURCE,
    "bug_source": "https://github.com/joeynmt/joeynmt/issues/184",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-train-mode")
