"""d14: AntixK's VanillaVAE with ExponentialLR(0.95) stepped after every batch instead of every epoch."""
from _d_vae import SOURCE, run as _train

LABEL = {"family": "vae", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "lr-schedule",
         "source": SOURCE,
         "bug_source": "https://github.com/Lornatang/SRGAN-PyTorch/issues/1"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="sched-per-batch")
