"""dsgiitr/d2l-pytorch MLP from scratch; faulty: optimizer.zero_grad() left out of the
batch loop."""
from _x_d2l_scratch import SOURCE, run as _train

LABEL = {"family": "mlp", "optimizer": "sgd", "loss_reduction": "mean",
         "healthy": False, "cause": "missing-zero-grad", "source": SOURCE,
         "bug_source": "https://github.com/yastrebksv/TennisCourtDetector/issues/7"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-zero")
