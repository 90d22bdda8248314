"""Shawn1993 CNN_Text: convolutions over word embeddings, dropout, cross_entropy, Adam,
periodic evaluation in eval mode, as published."""
from _w_cnn_text import SOURCE, run as _train

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
    _train(run_dir, seed, bug=None)
