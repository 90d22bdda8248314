"""b30: d2l's airfoil linear regression with torch.optim.Adadelta(rho=0.9, lr=1.0): healthy."""
from _b_d2l_ch11 import train

LABEL = {"family": "tabular", "optimizer": "adadelta", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": "https://github.com/d2l-ai/d2l-en/blob/23d7a5aecceee57d1292c56e90cce307f183bb0a/chapter_optimization/adadelta.md",
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed)
