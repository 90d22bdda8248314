"""pytorch/examples mnist: a CNN on digits, Adadelta(lr=1.0), StepLR per epoch; faulty: nll_loss
reads raw scores: forward returns no log_softmax."""
from _a_mnist import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adadelta",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "loss-input-contract",
    "source": SOURCE,
    "bug_source": "https://github.com/yanx27/Pointnet_Pointnet2_pytorch/issues/30",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="nll-on-logits")
