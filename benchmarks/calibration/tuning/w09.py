"""pytorch-beginner GAN; faulty: the generator's optimizer is built on the discriminator's
parameters, so the generator is in no optimizer."""
from _w_beginner_gan import SOURCE, run as _train

LABEL = {
    "family": "gan",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "param-not-in-optimizer",
    "source": SOURCE,
    "bug_source": "https://github.com/wiseodd/controlled-text-generation/issues/15",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="g-opt-on-d")
