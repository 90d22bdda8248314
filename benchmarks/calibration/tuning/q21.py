"""kekmodel/FixMatch-pytorch; faulty: the per-batch cosine schedule built over the number of
epochs instead of the number of steps."""
from _q_fixmatch import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-schedule",
    "source": SOURCE,
    "bug_source": "https://github.com/vturrisi/solo-learn/issues/264",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="sched-epochs")
