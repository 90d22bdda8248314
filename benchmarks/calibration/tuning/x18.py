"""jrzaurin/pytorch-widedeep TabMlp; faulty: the validation split is not standardized."""
from _x_widedeep import SOURCE, run as _train

LABEL = {"family": "tabular", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "train-val-preprocessing-mismatch", "source": SOURCE,
         "bug_source": "https://github.com/PolymathicAI/the_well/issues/68"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="val-unscaled")
