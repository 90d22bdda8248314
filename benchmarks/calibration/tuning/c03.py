"""c03: yunjey's ConvNet with gradient accumulation (micro-batches of 25, loss / 4, step every 4): healthy."""
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
    _train(run_dir, seed, bug="accum")
