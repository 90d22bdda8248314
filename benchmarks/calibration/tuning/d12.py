"""d12: AntixK's VanillaVAE trained on batches of 4 through its BatchNorm2d layers."""
from _d_vae import SOURCE, run as _train

LABEL = {"family": "vae", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "batchnorm-small-batch",
         "source": SOURCE,
         "bug_source": "https://github.com/YvanYin/GoalFlow/issues/17"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="batch-4")
