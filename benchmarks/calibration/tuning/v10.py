"""znxlwm fully connected GAN; faulty: the generator optimizer's step left out."""
from _v_znxlwm_gan import SOURCE, run as _train

LABEL = {
    "family": "gan",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "optimizer-step-missing",
    "source": SOURCE,
    "bug_source": "https://github.com/clovaai/stargan-v2/issues/106",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-g-step")
