"""yashu-seth tabular network; faulty: the output column left among the inputs."""
from _v_tabular import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "data-leak",
    "source": SOURCE,
    "bug_source": "https://github.com/david-thrower/cerebros-core-algorithm-alpha/issues/182",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="target-in-features")
