"""chenyuntc/pytorch-book Chapter11 Transformer poetry model; faulty: held-out poems scored without model.eval()."""
from _r_pbook_poetry import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'eval-in-train-mode',
    "source": SOURCE,
    "bug_source": 'https://github.com/BNUCNL/dnnbrain/pull/72',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='no-eval')
