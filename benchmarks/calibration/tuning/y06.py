"""dlwpt-code p1ch6: Linear(1,13)-Tanh-Linear(13,1), MSELoss, SGD(lr=1e-3); healthy."""
from _y_dlwpt import SOURCE_SEQ as SOURCE, run_seq as _train

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
