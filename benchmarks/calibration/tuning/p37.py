"""pytorch-lr-finder gradient-accumulation MNIST Net; faulty: one bug from the linked thread."""
from _p_accum import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "gradient-accumulation-bug",
    "source": SOURCE,
    "bug_source": "https://github.com/pytorch/torchtitan/pull/3575",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="zero-grad-per-micro-batch")
