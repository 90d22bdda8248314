"""timbmg/VAE-CVAE-MNIST; faulty: the KL term enters the loss with its sign flipped."""
from _x_vae import SOURCE, run as _train

LABEL = {"family": "vae", "optimizer": "adam", "loss_reduction": "sum",
         "healthy": False, "cause": "wrong-loss-sign", "source": SOURCE,
         "bug_source": "https://github.com/dev4488/VAE_gumble_softmax/issues/1"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="kld-sign")
