"""patrickloeber feed-forward net; faulty: Adam at lr 1e-6."""
from _v_ploeber_ffn import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-too-low",
    "source": SOURCE,
    "bug_source": "https://github.com/tegg89/SRCNN-Tensorflow/issues/24",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="lr-1e-6")
