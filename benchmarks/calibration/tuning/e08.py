"""e08: pytorch/tutorials nn_tutorial's final Sequential CNN (ReLU on the class maps as
published, SGD 0.1 momentum 0.9)."""
from _e_nn_tutorial import SOURCE, run as _train

LABEL = {"family": "cnn", "optimizer": "sgd", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": SOURCE,
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, variant="cnn")
