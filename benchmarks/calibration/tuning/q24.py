"""ShusenTang/Dive-into-DL-PyTorch 3.10 mlp-pytorch; faulty: the training images and labels
shuffled each by its own permutation."""
from _q_zh import SOURCE_MLP as SOURCE, run_mlp as _train

LABEL = {
    "family": "mlp",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "label-corruption",
    "source": SOURCE,
    "bug_source": "https://github.com/mlcommons/GaNDLF/pull/870",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="shuffle-apart")
