"""spinningup VPG; faulty: the value output left (N, 1) against (N,) returns."""
from _u_spinup_vpg import SOURCE, run as _train

LABEL = {
    "family": "rl",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "shape-broadcast",
    "source": SOURCE,
    "bug_source": "https://github.com/thu-ml/tianshou/pull/155",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="v-unflattened")
