"""tkipf/pygcn; faulty: the training nodes' labels shuffled apart from the nodes."""
from _y_pygcn import SOURCE as SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'label-corruption',
    "source": SOURCE,
    "bug_source": 'https://github.com/ck37/coral-ordinal/issues/6',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='train-labels-shuffled')
