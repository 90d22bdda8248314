"""ShusenTang/Dive-into-DL-PyTorch 7.6 rmsprop (train_pytorch_ch7); faulty: the prediction's
.view(-1) left out, an (N, 1) column against (N,) targets."""
from _q_zh import SOURCE_RMSPROP as SOURCE, run_rmsprop as _train

LABEL = {
    "family": "tabular",
    "optimizer": "rmsprop",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "shape-broadcast",
    "source": SOURCE,
    "bug_source": "https://github.com/pytorch/pytorch/issues/19699",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-view")
