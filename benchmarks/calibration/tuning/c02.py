"""c02: yunjey's ConvNet with Adam(lr=1.0)."""
from _c_yunjey_cnn import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-too-high",
    "source": SOURCE,
    "bug_source": "https://github.com/rajveermalviya/language-modeling/issues/3",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="lr-1")
