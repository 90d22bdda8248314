"""ShusenTang/Dive-into-DL-PyTorch 7.6 rmsprop (train_pytorch_ch7): a linear regression on a
standardized table with RMSprop(lr=0.01, alpha=0.9), as published."""
from _q_zh import SOURCE_RMSPROP as SOURCE, run_rmsprop as _train

LABEL = {
    "family": "tabular",
    "optimizer": "rmsprop",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
