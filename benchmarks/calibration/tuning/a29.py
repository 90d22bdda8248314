"""karpathy/minGPT: gpt-nano learning to sort, AdamW with decay groups, clipping at 1.0; faulty:
clip_grad_norm_ called after optimizer.step()."""
from _a_mingpt import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "clip-misuse",
    "source": SOURCE,
    "bug_source": "https://github.com/jongwook/onsets-and-frames/issues/24",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="clip-after-step")
