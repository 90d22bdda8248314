"""b25: d2l's BatchNorm LeNet trained on batches of 4 images."""
from _b_d2l_bn import train

LABEL = {"family": "cnn", "optimizer": "sgd", "loss_reduction": "mean",
         "healthy": False, "cause": "batchnorm-small-batch",
         "source": "https://github.com/d2l-ai/d2l-en/blob/23d7a5aecceee57d1292c56e90cce307f183bb0a/chapter_convolutional-modern/batch-norm.md",
         "bug_source": "https://github.com/tinghuiz/SfMLearner/issues/30"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bug="batch-4")
