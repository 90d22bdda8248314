"""jcjohnson recurrent_net; faulty: the held-out rows also drawn for training."""
from _u_jcj_recurrent import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "sgd",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "train-val-overlap",
    "source": SOURCE,
    "bug_source": "https://github.com/gyhui14/spottune/issues/4",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="val-in-train")
