"""dataflowr linear regression with a hand-written update and summed MSE; healthy."""
from _p_linreg import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "manual",
    "loss_reduction": "sum",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
