"""jcjohnson two_layer_net_optim, healthy with RMSprop(1e-4)."""
from _u_jcj_optim import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "rmsprop",
    "loss_reduction": "sum",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="rmsprop")
