"""aladdinpersson simple CNN; faulty: the convolutions frozen with requires_grad=False."""
from _v_aladdin_cnn import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "frozen-by-mistake",
    "source": SOURCE,
    "bug_source": "https://github.com/ihciah/deep-fashion-retrieval/issues/1",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="frozen-convs")
