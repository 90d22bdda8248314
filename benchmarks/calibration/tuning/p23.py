"""attention-is-all-you-need-pytorch on a reversal task; faulty: one bug from the linked thread."""
from _p_attn import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "lr-schedule",
    "source": SOURCE,
    "bug_source": "https://github.com/jadore801120/attention-is-all-you-need-pytorch/pull/168",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="warmup-128000")
