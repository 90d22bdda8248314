"""Jackson-Kang/Pytorch-VAE-tutorial: MLP VAE, summed BCE + KLD, Adam(lr=1e-3), batch 100; healthy."""
from _y_vae import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
