"""akamaster/pytorch_resnet_cifar10; faulty: model.train() called once before the epochs, so training runs in eval mode after the first validate()."""
from _y_resnet import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'train-in-eval-mode',
    "source": SOURCE,
    "bug_source": 'https://github.com/ermongroup/ncsn/issues/2',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='train-once')
