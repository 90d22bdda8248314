"""torchvision classification reference; faulty: model.train() left out of train_one_epoch, so
training runs in eval mode after the first evaluation."""
from _v_tv_classification import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "train-in-eval-mode",
    "source": SOURCE,
    "bug_source": "https://github.com/tk-rusch/coRNN/issues/1",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-train-mode")
