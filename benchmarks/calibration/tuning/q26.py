"""ShusenTang/Dive-into-DL-PyTorch 3.13 dropout: a two-hidden-layer MLP with Dropout(0.2)
and Dropout(0.5), SGD(lr=0.5), as published."""
from _q_zh import SOURCE_DROPOUT as SOURCE, run_dropout as _train

LABEL = {
    "family": "mlp",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
