"""ShusenTang/Dive-into-DL-PyTorch 3.10 mlp-pytorch: a one-hidden-layer MLP on digits with
SGD(lr=0.5), as published."""
from _q_zh import SOURCE_MLP as SOURCE, run_mlp as _train

LABEL = {
    "family": "mlp",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
