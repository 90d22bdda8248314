"""dreamquark-ai/tabnet: TabNet (GLU blocks, Ghost BatchNorm, sparsemax attention), Adam 2e-2,
sparsity loss, clip_grad_norm_ 1."""
from _z_tabnet import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
