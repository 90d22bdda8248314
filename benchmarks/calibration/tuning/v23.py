"""torchvision classification reference; faulty: gradients clipped to norm 0.001."""
from _v_tv_classification import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "clip-misuse",
    "source": SOURCE,
    "bug_source": "https://github.com/facebookresearch/detr/issues/198",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="clip-1e-3")
