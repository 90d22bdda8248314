"""patrickloeber feed-forward net; faulty: the output layer left out of the optimizer."""
from _v_ploeber_ffn import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "param-not-in-optimizer",
    "source": SOURCE,
    "bug_source": "https://github.com/Replicable-MARL/MARLlib/issues/146",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="l2-left-out")
