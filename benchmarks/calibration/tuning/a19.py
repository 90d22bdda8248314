"""pytorch/examples vae: a fully connected VAE, BCE + KLD summed, Adam; faulty: the KL term's sign
flipped: the loss rewards a large KL divergence."""
from _a_vae import SOURCE, run as _train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "wrong-loss-sign",
    "source": SOURCE,
    "bug_source": "https://github.com/pytorch/examples/issues/824",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="kld-sign")
