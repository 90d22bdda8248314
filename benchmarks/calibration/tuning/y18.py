"""zalandoresearch/pytorch-vq-vae; faulty: the validation images skip Normalize()."""
from _y_vqvae import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'train-val-preprocessing-mismatch',
    "source": SOURCE,
    "bug_source": 'https://github.com/lyuwenyu/RT-DETR/issues/312',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='val-unnormalized')
