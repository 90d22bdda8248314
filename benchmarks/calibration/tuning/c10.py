"""c10: makemore's MLP character model (AdamW, cross_entropy ignore_index=-1) as published."""
from _c_makemore import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
