"""1Konny/Beta-VAE: BetaVAE_H; faulty: Adam's learning rate 0.05."""
from _z_betavae import SOURCE, run as _train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "lr-too-high",
    "source": SOURCE,
    "bug_source": "https://github.com/OpenNMT/OpenNMT-py/issues/805",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="lr-high")
