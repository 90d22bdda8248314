"""pytorch-lr-finder gradient-accumulation MNIST Net (8 x 32 micro-batches), SGD; healthy."""
from _p_accum import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
