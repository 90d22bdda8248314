"""leftthomas SimCLR on digits with a shrunk encoder: NT-Xent written out, Adam, kNN monitor, as
published."""
from _v_simclr import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
