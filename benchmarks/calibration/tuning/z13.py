"""huggingface/transformers run_glue_no_trainer.py; faulty: embeddings and encoder frozen
(requires_grad=False), only pooler and classifier train."""
from _z_hf_glue import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "frozen-by-mistake",
    "source": SOURCE,
    "bug_source": "https://github.com/CyberZHG/keras-bert/issues/108",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="frozen-encoder")
