"""karpathy/minGPT: gpt-nano learning to sort, AdamW with decay groups, clipping at 1.0; healthy:
the code as published."""
from _a_mingpt import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
