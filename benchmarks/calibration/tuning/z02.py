"""1Konny/Beta-VAE: BetaVAE_H; faulty: a sigmoid ends the decoder, its probabilities read as logits by
binary_cross_entropy_with_logits."""
from _z_betavae import SOURCE, run as _train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "loss-input-contract",
    "source": SOURCE,
    "bug_source": "https://github.com/itakurah/focal-loss-pytorch/pull/5",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="sigmoid-logits")
