"""milesial Pytorch-UNet on synthetic shapes; faulty: one bug from the linked thread."""
from _p_unet import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "rmsprop",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "train-in-eval-mode",
    "source": SOURCE,
    "bug_source": "https://github.com/asyml/texar-pytorch/issues/310",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-train")
