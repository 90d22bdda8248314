"""princeton-nlp/SimCSE; faulty: the linear schedule sized for an eighth of the steps, the LR zero after it."""
from _r_simcse import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'lr-schedule',
    "source": SOURCE,
    "bug_source": 'https://github.com/huggingface/transformers/issues/26827',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='short-schedule')
