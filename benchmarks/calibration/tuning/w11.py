"""former CTransformer; faulty: the warm-up LambdaLR is never stepped, so the LR stays 0."""
from _w_former import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-schedule",
    "source": SOURCE,
    "bug_source": "https://github.com/saforem2/ezpz/pull/128",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-sch-step")
