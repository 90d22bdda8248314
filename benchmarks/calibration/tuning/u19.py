"""jcjohnson recurrent_net; faulty: SGD weight_decay far too high."""
from _u_jcj_recurrent import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "sgd",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "weight-decay-too-high",
    "source": SOURCE,
    "bug_source": "https://github.com/BVLC/caffe/issues/1396",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="wd")
