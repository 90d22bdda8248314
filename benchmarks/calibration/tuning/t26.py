"""cloneofsimo minDiffusion superminddpm, a BatchNorm conv noise model, Adam, MSE: faulty: the
images go in as 0-255 pixels (no ToTensor/Normalize)."""
from _t_ddpm import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'input-scale',
    "source": SOURCE,
    "bug_source": 'https://github.com/DeweiHu/OCT_DDPM/issues/3',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='raw-pixels')
