"""karpathy/minGPT: gpt-nano learning to sort, AdamW with decay groups, clipping at 1.0; faulty:
the causal mask left out: each position attends to the tokens it must predict."""
from _a_mingpt import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "data-leak",
    "source": SOURCE,
    "bug_source": "https://github.com/liangwq/Chatglm_lora_multi-gpu/issues/39",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-causal-mask")
