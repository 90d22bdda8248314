"""dsgiitr/d2l-pytorch concise dropout MLP with SGD, as published."""
from _x_d2l_mlp import SOURCE, run as _train

LABEL = {"family": "mlp", "optimizer": "sgd", "loss_reduction": "mean",
         "healthy": True, "cause": None, "source": SOURCE,
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
