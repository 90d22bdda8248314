"""manujosephv/pytorch_tabular covertype example: CategoryEmbeddingModel (embeddings, 128-64-32 MLP), CrossEntropyLoss, Adam(lr=1e-3), batch 512; healthy."""
from _y_tabular import SOURCE as SOURCE, run as _train

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
    _train(run_dir, seed, bug=None)
