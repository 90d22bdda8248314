"""aladdinpersson simple CNN; faulty: optimizer.zero_grad() left out."""
from _v_aladdin_cnn import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "missing-zero-grad",
    "source": SOURCE,
    "bug_source": "https://github.com/IDEA-Research/DN-DETR/issues/19",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-zero-grad")
