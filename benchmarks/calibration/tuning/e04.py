"""e04: sthalles/SimCLR as published (NT-Xent with every target 0, temperature 0.07, Adam 3e-4
wd 1e-4, cosine after 10 warm-up epochs)."""
from _e_simclr import SOURCE, run as _train

LABEL = {"family": "contrastive", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": SOURCE,
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
