"""dlwpt-code p1ch5 autograd: linear thermometer model, hand-written update, lr 1e-2 on 0.1 * t_u; healthy."""
from _y_dlwpt import SOURCE_MANUAL as SOURCE, run_manual as _train

LABEL = {
    "family": "mlp",
    "optimizer": "manual",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
