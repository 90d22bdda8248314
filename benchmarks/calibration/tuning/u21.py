"""jcjohnson recurrent_net: one linear layer applied three times per forward, SGD with momentum,
summed MSE, as published."""
from _u_jcj_recurrent import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "sgd",
    "loss_reduction": "sum",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
