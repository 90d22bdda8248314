"""lucidrains/byol-pytorch: BYOL; faulty: Adam given the backbone's parameters only, the projector and
predictor left out of the optimizer."""
from _z_byol import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "param-not-in-optimizer",
    "source": SOURCE,
    "bug_source": "https://github.com/CIntellifusion/GeometryForcing/issues/13",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="net-params-only")
