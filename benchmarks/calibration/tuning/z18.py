"""dreamquark-ai/tabnet: TabNet; faulty: the param.grad = None reset left out of _train_batch()."""
from _z_tabnet import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "missing-zero-grad",
    "source": SOURCE,
    "bug_source": "https://github.com/huggingface/transformers/issues/340",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-grad-reset")
