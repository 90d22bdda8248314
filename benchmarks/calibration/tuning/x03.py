"""lucidrains/vit-pytorch SimpleViT; faulty: optimizer.zero_grad() left out of the loop."""
from _x_vit import SOURCE, run as _train

LABEL = {"family": "transformer", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "missing-zero-grad", "source": SOURCE,
         "bug_source": "https://github.com/IBM/aihwkit/issues/446"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-zero-grad")
