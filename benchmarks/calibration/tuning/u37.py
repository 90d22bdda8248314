"""hyunwoongko encoder-decoder Transformer: Adam with weight decay, gradient clipping,
ReduceLROnPlateau after warm-up, as published (mask fixed)."""
from _u_hw_transformer import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
