"""karpathy/minGPT: gpt-nano learning to sort, AdamW with decay groups, clipping at 1.0; faulty:
configure_optimizers without the Embedding blacklist and its assert: wte and wpe in no group."""
from _a_mingpt import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "param-not-in-optimizer",
    "source": SOURCE,
    "bug_source": "https://github.com/karpathy/minGPT/issues/112",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="embedding-not-grouped")
