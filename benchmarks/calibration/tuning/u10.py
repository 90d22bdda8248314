"""jcjohnson two_layer_net_optim; faulty: Adam(lr=1.0) instead of 1e-4."""
from _u_jcj_optim import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "lr-too-high",
    "source": SOURCE,
    "bug_source": "https://github.com/OpenNMT/OpenNMT-tf/issues/744",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="lr-1")
