"""dataflowr double-moon GAN; faulty: one bug from the linked thread."""
from _p_moons_gan import SOURCE, run as _train

LABEL = {
    "family": "gan",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "missing-zero-grad",
    "source": SOURCE,
    "bug_source": "https://github.com/Lightning-AI/pytorch-lightning/pull/666",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-g-zero-grad")
