"""ShusenTang/Dive-into-DL-PyTorch 3.10 mlp-pytorch; faulty: optimizer.zero_grad() once per
epoch instead of once per batch."""
from _q_zh import SOURCE_MLP as SOURCE, run_mlp as _train

LABEL = {
    "family": "mlp",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "missing-zero-grad",
    "source": SOURCE,
    "bug_source": "https://github.com/heartcored98/Standalone-DeepLearning/issues/11",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="zero-grad-per-epoch")
