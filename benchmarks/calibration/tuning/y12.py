"""karpathy/ng-video-lecture gpt.py; faulty: AdamW(lr=1e-1)."""
from _y_ngpt import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'lr-too-high',
    "source": SOURCE,
    "bug_source": 'https://github.com/gaopengcuhk/Stable-Pix2Seq/issues/4',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='lr-1e-1')
