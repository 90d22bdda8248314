"""lucidrains/byol-pytorch: BYOL; faulty: learner.eval() from the per-epoch probe never undone, so
training continues in eval mode."""
from _z_byol import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "train-in-eval-mode",
    "source": SOURCE,
    "bug_source": "https://github.com/pfnet/pytorch-pfn-extras/issues/688",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="eval-left-on")
