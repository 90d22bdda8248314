"""harvardnlp/annotated-transformer, the copy-task example; faulty: the Generator returns
the projection's raw scores to KLDivLoss."""
from _q_annot import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "loss-input-contract",
    "source": SOURCE,
    "bug_source": "https://github.com/michaal94/torch_DCEC/issues/1",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="gen-logits")
