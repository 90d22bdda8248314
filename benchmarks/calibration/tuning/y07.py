"""dlwpt-code p1ch6; faulty: the (N,) target broadcast against the (N, 1) prediction."""
from _y_dlwpt import SOURCE_SEQ as SOURCE, run_seq as _train

LABEL = {
    "family": "mlp",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'shape-broadcast',
    "source": SOURCE,
    "bug_source": 'https://github.com/pytorch/pytorch/issues/16045',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='t_c-1d')
