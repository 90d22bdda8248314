"""uvadlc tutorial 3 BaseNetwork (ReLU MLP) on digits, SGD with momentum; healthy."""
from _p_actfn import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
