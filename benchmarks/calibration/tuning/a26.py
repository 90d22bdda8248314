"""pytorch/examples siamese_network: pairs of digits, a shared encoder, BCELoss; faulty: the test
pairs drawn from the training images."""
from _a_siamese import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "adadelta",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "train-val-overlap",
    "source": SOURCE,
    "bug_source": "https://github.com/MOhammedJAbi/Imsat/issues/2",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="test-from-train")
