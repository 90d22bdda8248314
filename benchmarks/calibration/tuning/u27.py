"""devnag GAN; faulty: the generator step calls the discriminator's optimizer."""
from _u_devnag_gan import SOURCE, run as _train

LABEL = {
    "family": "gan",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "optimizer-step-missing",
    "source": SOURCE,
    "bug_source": "https://github.com/ufal/npfl138/issues/57",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="g-step-d-opt")
