"""1Konny/Beta-VAE: BetaVAE_H, objective H, bernoulli BCE-with-logits summed / batch, Adam."""
from _z_betavae import SOURCE, run as _train

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
    _train(run_dir, seed)
