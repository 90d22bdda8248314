"""facebookresearch/simsiam: SimSiam with stop-gradient, negative cosine loss, SGD(lr=0.05*bs/256, momentum 0.9, wd 1e-4), cosine per epoch; healthy."""
from _y_simsiam import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
