"""jcjohnson two_layer_net_autograd; faulty: a learning rate ten times too high."""
from _u_jcj_autograd import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "manual",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "lr-too-high",
    "source": SOURCE,
    "bug_source": "https://github.com/guillaumegenthial/sequence_tagging/issues/47",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="lr-1e-4")
