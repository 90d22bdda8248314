"""mrdbourke/pytorch-deep-learning 02 classification: CircleModelV2 on make_circles, BCEWithLogitsLoss, SGD(lr=0.1), full batch; healthy."""
from _y_circles import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
