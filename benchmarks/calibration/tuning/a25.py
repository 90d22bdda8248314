"""pytorch/examples siamese_network: pairs of digits, a shared encoder, BCELoss; faulty:
BCEWithLogitsLoss on the sigmoid's output (a sigmoid applied twice)."""
from _a_siamese import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "adadelta",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "loss-input-contract",
    "source": SOURCE,
    "bug_source": "https://github.com/yudi-mars/daisyRec/pull/15",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="bce-with-logits")
