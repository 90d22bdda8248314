"""b17: d2l's house prices with the log of SalePrice, made while exploring, left among the
features."""
from _b_d2l_house import train

LABEL = {"family": "tabular", "optimizer": "sgd", "loss_reduction": "mean",
         "healthy": False, "cause": "data-leak",
         "source": "https://github.com/d2l-ai/d2l-en/blob/23d7a5aecceee57d1292c56e90cce307f183bb0a/chapter_multilayer-perceptrons/kaggle-house-price.md",
         "bug_source": "https://zeupark.github.io/2025/05/26/overfitting-debug-log.html"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bug="log-label-in-features")
