"""d11: AntixK's VanillaVAE as configured in vae.yaml (Adam 0.005, ExponentialLR 0.95 per epoch, kld_weight 0.00025)."""
from _d_vae import SOURCE, run as _train

LABEL = {"family": "vae", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": SOURCE,
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
