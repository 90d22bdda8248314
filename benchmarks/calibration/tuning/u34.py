"""adambielski siamese-triplet Siamese network with a contrastive loss; faulty: StepLR stepped
after every batch instead of every epoch."""
from _u_siamese import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-schedule",
    "source": SOURCE,
    "bug_source": "https://github.com/leftthomas/SRGAN/issues/94",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="sched-per-batch")
