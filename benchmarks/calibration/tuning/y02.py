"""mrdbourke/pytorch-deep-learning 02 classification; faulty: sigmoid probabilities fed to BCEWithLogitsLoss."""
from _y_circles import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'loss-input-contract',
    "source": SOURCE,
    "bug_source": 'https://github.com/argusswift/YOLOv4-pytorch/issues/89',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='sigmoid-into-logits-loss')
