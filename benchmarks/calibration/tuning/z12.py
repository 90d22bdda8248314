"""huggingface/transformers run_glue_no_trainer.py; faulty: encoder layers without batch_first=True fed
(batch, seq, hidden)."""
from _z_hf_glue import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "wrong-batch-axis",
    "source": SOURCE,
    "bug_source": "https://github.com/IBM/TabFormer/pull/14",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="seq-first")
