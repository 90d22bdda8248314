"""huggingface/transformers run_glue_no_trainer.py: BERT-style encoder, AdamW groups, linear warm-up,
gradient accumulation 2."""
from _z_hf_glue import SOURCE, run as _train

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
    _train(run_dir, seed)
