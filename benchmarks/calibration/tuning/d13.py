"""d13: AntixK's VanillaVAE with Adam(weight_decay=0.5)."""
from _d_vae import SOURCE, run as _train

LABEL = {"family": "vae", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "weight-decay-too-high",
         "source": SOURCE,
         "bug_source": "https://github.com/fastai/fastai/issues/1806"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="wd-0.5")
