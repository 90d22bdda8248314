"""torchvision classification reference; faulty: the StepLR stepped after every batch."""
from _v_tv_classification import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-schedule",
    "source": SOURCE,
    "bug_source": "https://github.com/pytorch/vision/issues/1261",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="sched-per-batch")
