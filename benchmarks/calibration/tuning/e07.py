"""e07: pytorch/tutorials nn_tutorial's logistic regression from scratch (hand-written
log_softmax and nll, manual update lr 0.5)."""
from _e_nn_tutorial import SOURCE, run as _train

LABEL = {"family": "mlp", "optimizer": "manual", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": SOURCE,
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, variant="scratch")
