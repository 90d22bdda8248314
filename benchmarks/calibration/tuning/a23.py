"""pytorch/examples dcgan: a DCGAN on digits, one Adam per network; faulty: optimizerD.step() left
out: the discriminator never updates."""
from _a_dcgan import SOURCE, run as _train

LABEL = {
    "family": "gan",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "optimizer-step-missing",
    "source": SOURCE,
    "bug_source": "https://github.com/zhaoyuzhi/deepfillv2/issues/6",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-d-step")
