"""karpathy/pytorch-made; faulty: a sigmoid applied to the logits before
binary_cross_entropy_with_logits."""
from _w_made import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "loss-input-contract",
    "source": SOURCE,
    "bug_source": "https://github.com/avBuffer/UNet3plus_pth/issues/23",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="sigmoid-logits")
