"""yashu-seth tabular network; faulty: the output column left (N,) against (N, 1) predictions."""
from _v_tabular import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "shape-broadcast",
    "source": SOURCE,
    "bug_source": "https://github.com/timeseriesAI/tsai/issues/22",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="y-flat")
