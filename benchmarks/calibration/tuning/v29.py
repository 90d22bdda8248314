"""leftthomas SimCLR; faulty: temperature 0.01, so exp(similarity / temperature) overflows."""
from _v_simclr import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "nonfinite-values",
    "source": SOURCE,
    "bug_source": "https://github.com/Lightning-Universe/lightning-bolts/issues/811",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="temperature-0.01")
