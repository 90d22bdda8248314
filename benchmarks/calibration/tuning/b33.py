"""b33: d2l's hand-written adadelta() without its p.grad.data.zero_(): gradients summed over
every step."""
from _b_d2l_ch11 import train

LABEL = {"family": "tabular", "optimizer": "manual", "loss_reduction": "mean",
         "healthy": False, "cause": "missing-zero-grad",
         "source": "https://github.com/d2l-ai/d2l-en/blob/23d7a5aecceee57d1292c56e90cce307f183bb0a/chapter_optimization/adadelta.md",
         "bug_source": "https://flisks.com/python-why-do-we-need-to-call-zero-grad-in-pytorch"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, trainer="scratch", bug="no-grad-zero")
