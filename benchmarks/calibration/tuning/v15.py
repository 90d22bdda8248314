"""aladdinpersson VAE; faulty: the KL term's sign flipped."""
from _v_aladdin_vae import SOURCE, run as _train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "wrong-loss-sign",
    "source": SOURCE,
    "bug_source": "https://github.com/FluxML/model-zoo/pull/147",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="kl-sign")
