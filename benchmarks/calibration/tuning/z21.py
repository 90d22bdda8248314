"""facebookresearch/barlowtwins main.py: Barlow Twins loss, LARS with two param groups, warm-up +
cosine per step."""
from _z_barlow import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "sgd",
    "loss_reduction": "sum",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
