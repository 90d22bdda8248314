"""dataflowr linear regression with a hand-written update; faulty: one bug from the linked thread."""
from _p_linreg import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "manual",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "exploding-gradients",
    "source": SOURCE,
    "bug_source": "https://github.com/jax-ml/jax/pull/3113",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="n300")
