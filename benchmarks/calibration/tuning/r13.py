"""princeton-nlp/SimCSE unsupervised contrastive training, AdamW with linear decay; healthy."""
from _r_simcse import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
