"""karpathy/pytorch-made: MADE with masked linear layers, summed BCE-with-logits / B, Adam
with weight decay, StepLR, as published."""
from _w_made import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
