"""huggingface accelerate nlp_example, a small BERT pair classifier, AdamW, linear warm-up schedule,
gradient accumulation: faulty: the BERT encoder frozen, only the classifier head trains."""
from _t_accel_nlp import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'frozen-by-mistake',
    "source": SOURCE,
    "bug_source": 'https://github.com/allenai/allennlp-guide/issues/130',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='frozen-bert')
