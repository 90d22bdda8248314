"""b16: d2l's Kaggle house-price regression validated on the houses sold last (2010):
healthy."""
from _b_d2l_house import train

LABEL = {"family": "tabular", "optimizer": "sgd", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": "https://github.com/d2l-ai/d2l-en/blob/23d7a5aecceee57d1292c56e90cce307f183bb0a/chapter_multilayer-perceptrons/kaggle-house-price.md",
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, chronological=True)
