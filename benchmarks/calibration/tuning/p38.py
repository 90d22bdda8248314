"""pytorch_geometric GCN example on a synthetic citation graph; faulty: one bug from the linked thread."""
from _p_gcn import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-too-low",
    "source": SOURCE,
    "bug_source": "https://github.com/lucasjinreal/keras_frcnn/issues/76",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="lr-1e-5")
