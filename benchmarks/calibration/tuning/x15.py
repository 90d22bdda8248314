"""dsgiitr/d2l-pytorch dropout MLP; faulty: the test evaluation runs without net.eval()."""
from _x_d2l_mlp import SOURCE, run as _train

LABEL = {"family": "mlp", "optimizer": "sgd", "loss_reduction": "mean",
         "healthy": False, "cause": "eval-in-train-mode", "source": SOURCE,
         "bug_source": "https://github.com/wolny/pytorch-3dunet/issues/53"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-eval")
