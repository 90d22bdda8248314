"""facebookresearch moco, MoCo v1 with a queue and momentum key encoder, SGD, InfoNCE cross-entropy:
faulty: the positive-key labels set to ones instead of zeros."""
from _t_moco import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'label-corruption',
    "source": SOURCE,
    "bug_source": 'https://github.com/facebookresearch/moco/issues/145',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='labels-one')
