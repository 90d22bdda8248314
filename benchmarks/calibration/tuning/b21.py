"""b21: d2l's GAN on Gaussian data (two Adam optimizers, summed BCEWithLogits losses):
healthy."""
from _b_d2l_gan import train

LABEL = {"family": "gan", "optimizer": "adam", "loss_reduction": "sum",
         "healthy": True, "cause": None,
         "source": "https://github.com/d2l-ai/d2l-en/blob/23d7a5aecceee57d1292c56e90cce307f183bb0a/chapter_generative-adversarial-networks/gan.md",
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed)
