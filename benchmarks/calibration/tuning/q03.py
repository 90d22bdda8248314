"""harvardnlp/annotated-transformer, the copy-task example; faulty: the warm-up schedule
dropped, Adam trains at the lr=0.5 it was built with."""
from _q_annot import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-too-high",
    "source": SOURCE,
    "bug_source": "https://github.com/OpenNMT/OpenNMT-py/issues/869",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-noam")
