"""b20: d2l's house prices with the log prices left as (N,) against (N, 1) predictions."""
from _b_d2l_house import train

LABEL = {"family": "tabular", "optimizer": "sgd", "loss_reduction": "mean",
         "healthy": False, "cause": "shape-broadcast",
         "source": "https://github.com/d2l-ai/d2l-en/blob/23d7a5aecceee57d1292c56e90cce307f183bb0a/chapter_multilayer-perceptrons/kaggle-house-price.md",
         "bug_source": "https://github.com/Photon-AI-Research/NeuralSolvers/issues/20"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bug="target-shape")
