"""rasbt/machine-learning-book ch13: Auto MPG regression from a pandas frame, SGD; faulty:
gradient accumulation over 4 micro-batches whose losses are not divided by 4."""
from _a_auto_mpg import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "gradient-accumulation-bug",
    "source": SOURCE,
    "bug_source": "https://github.com/fastai/fastai/issues/3023",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="accum-no-divide")
