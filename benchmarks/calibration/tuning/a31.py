"""karpathy/minGPT: gpt-nano learning to sort, AdamW with decay groups, clipping at 1.0; faulty:
torch.optim.Adam given AdamW's weight_decay 0.1 (coupled L2, rescaled by Adam)."""
from _a_mingpt import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "weight-decay-too-high",
    "source": SOURCE,
    "bug_source": "https://github.com/facebookresearch/3detr/issues/26",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="adam-l2")
