"""karpathy/ng-video-lecture gpt.py: a small character GPT, AdamW(lr=3e-4), dropout 0.2; healthy."""
from _y_ngpt import SOURCE as SOURCE, run as _train

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
