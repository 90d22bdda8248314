"""sgrvinod/a-PyTorch-Tutorial-to-Text-Classification: hierarchical attention network (word and sentence GRUs with attention), Adam(lr=1e-3) decayed 10x per epoch; healthy."""
from _y_han import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
