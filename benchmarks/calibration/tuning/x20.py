"""labmlai annotated GAN; faulty: the discriminator optimizer's zero_grad() left out."""
from _x_labml_gan import SOURCE, run as _train

LABEL = {"family": "gan", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "missing-zero-grad", "source": SOURCE,
         "bug_source": "https://github.com/ajbrock/BigGAN-PyTorch/issues/25"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="d-no-zero-grad")
