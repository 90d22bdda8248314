"""chenyuntc/pytorch-book Chapter11 Transformer poetry model; faulty: (batch, seq) tokens fed to the sequence-first encoder."""
from _r_pbook_poetry import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'wrong-batch-axis',
    "source": SOURCE,
    "bug_source": 'https://github.com/DaoyuanLi2816/Molecule-Generator/pull/22',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='no-transpose')
