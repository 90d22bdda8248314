"""facebookresearch moco, MoCo v1 with a queue and momentum key encoder, SGD, InfoNCE cross-entropy:
faulty: model.train() called once before the epochs, BatchNorm in eval mode after the first
evaluation."""
from _t_moco import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'train-in-eval-mode',
    "source": SOURCE,
    "bug_source": 'https://github.com/ThilinaRajapakse/simpletransformers/issues/941',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='train-once')
