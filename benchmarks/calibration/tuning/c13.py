"""c13: makemore's MLP with AdamW weight_decay=200."""
from _c_makemore import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "weight-decay-too-high",
    "source": SOURCE,
    "bug_source": "https://github.com/fastai/fastai/issues/1806",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="wd-high")
