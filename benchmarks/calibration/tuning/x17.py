"""jrzaurin/pytorch-widedeep TabMlp; faulty: a sigmoid before BCEWithLogitsLoss."""
from _x_widedeep import SOURCE, run as _train

LABEL = {"family": "tabular", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "loss-input-contract", "source": SOURCE,
         "bug_source": "https://github.com/cvg/glue-factory/issues/89"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="sigmoid-logits")
