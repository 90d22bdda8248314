"""uvadlc tutorial 3 BaseNetwork on digits; faulty: one bug from the linked thread."""
from _p_actfn import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "vanishing-gradients",
    "source": SOURCE,
    "bug_source": "https://github.com/phlippe/uvadlc_notebooks/issues/119",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="sigmoid")
