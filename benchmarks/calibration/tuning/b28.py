"""b28: d2l's LeNet with its warm-up + cosine scheduler set once per epoch: healthy."""
from _b_d2l_lrsched import train

LABEL = {"family": "cnn", "optimizer": "sgd", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": "https://github.com/d2l-ai/d2l-en/blob/23d7a5aecceee57d1292c56e90cce307f183bb0a/chapter_optimization/lr-scheduler.md",
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, schedule="cosine")
