"""sksq96/pytorch-vae convolutional VAE; faulty: the decoder's sigmoid output given to binary_cross_entropy_with_logits."""
from _r_vae import SOURCE, run as _train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": 'loss-input-contract',
    "source": SOURCE,
    "bug_source": 'https://github.com/OsciiArt/Freesound-Audio-Tagging-2019/issues/1',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='logits-loss')
