"""jcjohnson two_layer_net_optim with one regression target; faulty: targets flattened to (N,)
against (N, 1) predictions."""
from _u_jcj_optim import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "shape-broadcast",
    "source": SOURCE,
    "bug_source": "https://github.com/deepset-ai/FARM/issues/229",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="scalar-flat")
