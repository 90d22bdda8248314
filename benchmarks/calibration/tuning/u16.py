"""jcjohnson two_layer_net_optim, healthy with SGD(1e-4, momentum 0.9)."""
from _u_jcj_optim import SOURCE, run as _train

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
    _train(run_dir, seed, bug="sgd")
