"""b26: d2l's BatchNorm LeNet with SGD weight_decay=0.5."""
from _b_d2l_bn import train

LABEL = {"family": "cnn", "optimizer": "sgd", "loss_reduction": "mean",
         "healthy": False, "cause": "weight-decay-too-high",
         "source": "https://github.com/d2l-ai/d2l-en/blob/23d7a5aecceee57d1292c56e90cce307f183bb0a/chapter_convolutional-modern/batch-norm.md",
         "bug_source": "https://github.com/Joker316701882/Additive-Margin-Softmax/issues/16"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bug="weight-decay")
