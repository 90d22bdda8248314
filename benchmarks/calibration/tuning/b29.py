"""b29: d2l's LeNet whose epoch-sized warm-up + cosine schedule is set in the batch loop: LR
at its floor after 16 batches."""
from _b_d2l_lrsched import train

LABEL = {"family": "cnn", "optimizer": "sgd", "loss_reduction": "mean",
         "healthy": False, "cause": "lr-schedule",
         "source": "https://github.com/d2l-ai/d2l-en/blob/23d7a5aecceee57d1292c56e90cce307f183bb0a/chapter_optimization/lr-scheduler.md",
         "bug_source": "https://github.com/ScrollPrize/villa/pull/1495"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, schedule="cosine", bug="cosine-per-batch")
