"""c09: Morvan's BatchNorm regression net trained on batches of 4."""
from _c_morvan_bn import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "batchnorm-small-batch",
    "source": SOURCE,
    "bug_source": "https://github.com/tinghuiz/SfMLearner/issues/30",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="batch-4")
