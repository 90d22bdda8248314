"""tkipf/pygcn: two-layer GCN, nll_loss, Adam(lr=0.01, weight_decay=5e-4), validation in eval mode; healthy."""
from _y_pygcn import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
