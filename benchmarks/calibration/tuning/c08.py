"""c08: Morvan's BatchNorm regression net without the net.train() after the per-epoch test."""
from _c_morvan_bn import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "train-in-eval-mode",
    "source": SOURCE,
    "bug_source": "https://github.com/pytorch/tutorials/issues/1624",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-train")
