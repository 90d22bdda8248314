"""b35: d2l's MLPScratch with b1 initialized to -1: every hidden ReLU starts dead."""
from _b_d2l_mlp_scratch import train

LABEL = {"family": "mlp", "optimizer": "manual", "loss_reduction": "mean",
         "healthy": False, "cause": "dead-units",
         "source": "https://github.com/d2l-ai/d2l-en/blob/23d7a5aecceee57d1292c56e90cce307f183bb0a/chapter_multilayer-perceptrons/mlp-implementation.md",
         "bug_source": "https://github.com/facebookresearch/dlrm/pull/358"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bug="negative-bias")
