"""pytorch_geometric GCN example on a synthetic citation graph; faulty: one bug from the linked thread."""
from _p_gcn import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "eval-in-train-mode",
    "source": SOURCE,
    "bug_source": "https://github.com/udacity/P1_Facial_Keypoints/issues/28",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-eval")
