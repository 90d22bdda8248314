"""d03: Lightning's backbone_image_classifier validated on rows split again from the whole set, most of them trained on."""
from _d_pl_backbone import SOURCE, run as _train

LABEL = {"family": "mlp", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "train-val-overlap",
         "source": SOURCE,
         "bug_source": "https://github.com/edgarsmdn/MLCE_book/pull/4"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="val-from-all")
