"""c04: yunjey's ConvNet accumulating gradients with optimizer.zero_grad() inside the micro-batch loop."""
from _c_yunjey_cnn import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "gradient-accumulation-bug",
    "source": SOURCE,
    "bug_source": "https://github.com/bytetriper/RAE/issues/67",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="accum-zero-inside")
