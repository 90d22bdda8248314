"""wiseodd generative-models vanilla VAE (bare parameters, Adam, summed BCE + KL): faulty: the KL
term's sign flipped."""
from _t_vae import SOURCE, run as _train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": 'wrong-loss-sign',
    "source": SOURCE,
    "bug_source": 'https://github.com/graviraja/pytorch-sample-codes/issues/6',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='kl-sign')
