"""attention-is-all-you-need-pytorch on a reversal task, Adam + ScheduledOptim warm-up, label smoothing; healthy."""
from _p_attn import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed)
