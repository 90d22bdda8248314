"""huggingface accelerate nlp_example, a small BERT pair classifier, AdamW, linear warm-up schedule,
gradient accumulation: faulty: the scheduler stepped per micro-batch, LR at zero halfway."""
from _t_accel_nlp import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'lr-schedule',
    "source": SOURCE,
    "bug_source": 'https://github.com/huggingface/diffusers/issues/4387',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='sched-per-micro')
