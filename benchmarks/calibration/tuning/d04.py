"""d04: Lightning's backbone_image_classifier with l1's weights all negative on non-negative pixels: every hidden ReLU off."""
from _d_pl_backbone import SOURCE, run as _train

LABEL = {"family": "mlp", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "dead-units",
         "source": SOURCE,
         "bug_source": "https://stats.stackexchange.com/questions/450100/understanding-relu-does-this-unlucky-intialized-network-assign-all-instances"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="negative-init")
