"""kekmodel/FixMatch-pytorch: semi-supervised WideResNet with pseudo-labels on strong
augmentations, SGD nesterov, a cosine schedule stepped per batch and an EMA model, as published."""
from _q_fixmatch import SOURCE, run as _train

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
    _train(run_dir, seed, bug=None)
