"""b31: d2l's airfoil regression with Adadelta and the standardization line left out: raw
units from 4e-4 to 2e4."""
from _b_d2l_ch11 import train

LABEL = {"family": "tabular", "optimizer": "adadelta", "loss_reduction": "mean",
         "healthy": False, "cause": "input-scale",
         "source": "https://github.com/d2l-ai/d2l-en/blob/23d7a5aecceee57d1292c56e90cce307f183bb0a/chapter_optimization/adadelta.md",
         "bug_source": "https://datascience.stackexchange.com/questions/117008/normalising-data-for-simple-linear-regression"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bug="raw-columns")
