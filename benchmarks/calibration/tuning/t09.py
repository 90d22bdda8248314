"""cloneofsimo minDiffusion superminddpm, a BatchNorm conv noise model, Adam, MSE: faulty: batch
size 2 under BatchNorm."""
from _t_ddpm import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'batchnorm-small-batch',
    "source": SOURCE,
    "bug_source": 'https://github.com/xuebinqin/BASNet/issues/42',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='batch-2')
