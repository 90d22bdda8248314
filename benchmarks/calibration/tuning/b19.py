"""b19: d2l's house prices without the fillna(0) of the numeric columns: NaN enters the
model."""
from _b_d2l_house import train

LABEL = {"family": "tabular", "optimizer": "sgd", "loss_reduction": "mean",
         "healthy": False, "cause": "nonfinite-values",
         "source": "https://github.com/d2l-ai/d2l-en/blob/23d7a5aecceee57d1292c56e90cce307f183bb0a/chapter_multilayer-perceptrons/kaggle-house-price.md",
         "bug_source": "https://pythonhint.com/post/1021424426335883/deep-learning-nan-loss-reasons"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bug="no-fillna")
