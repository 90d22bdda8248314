"""harvardnlp/annotated-transformer, the copy-task example: the encoder-decoder with
KLDivLoss label smoothing, Adam and the warm-up LambdaLR, as published."""
from _q_annot import SOURCE, run as _train

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
