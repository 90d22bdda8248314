"""jcjohnson two_layer_net_autograd; faulty: the w.grad.data.zero_() lines left out."""
from _u_jcj_autograd import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "manual",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "missing-zero-grad",
    "source": SOURCE,
    "bug_source": "https://github.com/greebear/pytorch-learning/issues/1",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-zero")
