"""b34: d2l's MLPScratch with its hand-written SGD: healthy."""
from _b_d2l_mlp_scratch import train

LABEL = {"family": "mlp", "optimizer": "manual", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": "https://github.com/d2l-ai/d2l-en/blob/23d7a5aecceee57d1292c56e90cce307f183bb0a/chapter_multilayer-perceptrons/mlp-implementation.md",
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed)
