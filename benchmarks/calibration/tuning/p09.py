"""milesial Pytorch-UNet on synthetic shapes, RMSprop, CE + dice; healthy."""
from _p_unet import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "rmsprop",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
