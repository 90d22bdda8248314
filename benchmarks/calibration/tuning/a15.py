"""pytorch/examples regression: a polynomial fit with a hand-written SGD update; faulty: targets
flattened to (32,) against a (32, 1) prediction in smooth_l1_loss."""
from _a_regression import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "manual",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "shape-broadcast",
    "source": SOURCE,
    "bug_source": "https://github.com/jiwei0921/CoNet/issues/3",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="flat-target")
