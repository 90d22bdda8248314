"""devnag GAN; faulty: D.zero_grad() left out of the discriminator step."""
from _u_devnag_gan import SOURCE, run as _train

LABEL = {
    "family": "gan",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "missing-zero-grad",
    "source": SOURCE,
    "bug_source": "https://github.com/Adversarial-Deep-Learning/code-soup/issues/69",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-d-zero")
