"""c01: yunjey's ConvNet (BatchNorm2d, Adam 1e-3, CrossEntropyLoss) as published."""
from _c_yunjey_cnn import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
