"""d02: Lightning's backbone_image_classifier with Adam(lr=1.0)."""
from _d_pl_backbone import SOURCE, run as _train

LABEL = {"family": "mlp", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "lr-too-high",
         "source": SOURCE,
         "bug_source": "https://github.com/rajveermalviya/language-modeling/issues/3"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="lr-1")
