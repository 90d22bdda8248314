"""former CTransformer: SGD with momentum, LambdaLR warm-up stepped per batch, gradient
clipping at 1.0, nll_loss on log_softmax, as published."""
from _w_former import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
