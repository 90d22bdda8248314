"""pytorch/examples vae: a fully connected VAE, BCE + KLD summed, Adam; faulty: Adam(lr=1e-6)
instead of 1e-3: the weights barely move."""
from _a_vae import SOURCE, run as _train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "lr-too-low",
    "source": SOURCE,
    "bug_source": "https://github.com/OpenLMLab/LOMO/issues/50",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="tiny-lr")
