"""jrzaurin/pytorch-widedeep TabMlp with BCEWithLogitsLoss, Adam and StepLR, as published."""
from _x_widedeep import SOURCE, run as _train

LABEL = {"family": "tabular", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": True, "cause": None, "source": SOURCE,
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
