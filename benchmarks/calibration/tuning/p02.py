"""NYU-DLSP20 spiral classification; faulty: one bug from the linked thread."""
from _p_spiral import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "missing-zero-grad",
    "source": SOURCE,
    "bug_source": "https://github.com/wenet-e2e/wekws/pull/73",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-zero-grad")
