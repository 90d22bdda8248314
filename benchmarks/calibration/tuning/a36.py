"""rasbt/machine-learning-book ch13: Auto MPG regression from a pandas frame, SGD; faulty:
df.dropna() left out: missing horsepowers enter as NaN."""
from _a_auto_mpg import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "nonfinite-values",
    "source": SOURCE,
    "bug_source": "https://github.com/circleAhn/TESLA-tf/issues/1",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="keep-nan")
