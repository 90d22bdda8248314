"""d01: Lightning's backbone_image_classifier as published (relu on the logits included)."""
from _d_pl_backbone import SOURCE, run as _train

LABEL = {"family": "mlp", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": SOURCE,
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
