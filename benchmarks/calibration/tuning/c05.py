"""c05: Morvan's 8-layer tanh regression net with BatchNorm1d (bad bias init -0.2), as published."""
from _c_morvan_bn import SOURCE, run as _train

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
