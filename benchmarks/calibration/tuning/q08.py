"""ShusenTang/Dive-into-DL-PyTorch 5.10 batch-norm: LeNet with BatchNorm and sigmoids,
Adam(lr=0.001), as published."""
from _q_zh import SOURCE_BN as SOURCE, run_lenet_bn as _train

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
