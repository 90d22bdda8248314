"""huggingface accelerate nlp_example, a small BERT pair classifier, AdamW, linear warm-up schedule,
gradient accumulation: as published."""
from _t_accel_nlp import SOURCE, run as _train

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
