"""ShusenTang/Dive-into-DL-PyTorch 5.10 batch-norm; faulty: the evaluation switches
net.eval() and never switches net.train() back."""
from _q_zh import SOURCE_BN as SOURCE, run_lenet_bn as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "train-in-eval-mode",
    "source": SOURCE,
    "bug_source": "https://github.com/pytorch/tutorials/pull/1602",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-train-back")
