"""lucidrains/vit-pytorch SimpleViT; faulty: a softmax ends forward and its output goes to
cross_entropy."""
from _x_vit import SOURCE, run as _train

LABEL = {"family": "transformer", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "loss-input-contract", "source": SOURCE,
         "bug_source": "https://github.com/MicrosoftDocs/ml-basics/issues/48"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="softmax-ce")
