"""pytorch/examples mnist: a CNN on digits, Adadelta(lr=1.0), StepLR per epoch; faulty:
model.train() called once before the epochs; after the first test() every epoch trains in eval
mode."""
from _a_mnist import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adadelta",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "train-in-eval-mode",
    "source": SOURCE,
    "bug_source": "https://github.com/MILVLG/mcan-vqa/issues/26",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="train-once")
