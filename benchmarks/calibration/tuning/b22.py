"""b22: d2l's GAN whose update_G steps the discriminator's optimizer instead of the
generator's."""
from _b_d2l_gan import train

LABEL = {"family": "gan", "optimizer": "adam", "loss_reduction": "sum",
         "healthy": False, "cause": "optimizer-step-missing",
         "source": "https://github.com/d2l-ai/d2l-en/blob/23d7a5aecceee57d1292c56e90cce307f183bb0a/chapter_generative-adversarial-networks/gan.md",
         "bug_source": "https://github.com/Lornatang/ESRGAN-PyTorch/issues/39"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bug="g-steps-d")
