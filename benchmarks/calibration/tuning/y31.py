"""Jackson-Kang/Pytorch-VAE-tutorial; faulty: the KLD term's sign flipped, so the KL divergence is maximized."""
from _y_vae import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": 'wrong-loss-sign',
    "source": SOURCE,
    "bug_source": 'https://github.com/pytorch/examples/issues/298',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='kld-sign')
