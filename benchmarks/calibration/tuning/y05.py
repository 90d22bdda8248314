"""dlwpt-code p1ch5 autograd; faulty: the raw t_u (20-80) goes in unscaled."""
from _y_dlwpt import SOURCE_MANUAL as SOURCE, run_manual as _train

LABEL = {
    "family": "mlp",
    "optimizer": "manual",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'input-scale',
    "source": SOURCE,
    "bug_source": 'https://github.com/deeplearning4j/deeplearning4j/issues/3346',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='raw-t_u')
