"""spro char-rnn-generation; faulty: the model is instantiated again after the optimizer was
built on the first instance, so the optimizer steps a model that is not trained."""
from _w_spro import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "optimizer-step-missing",
    "source": SOURCE,
    "bug_source": "https://github.com/spro/practical-pytorch/issues/9",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="stale-optimizer")
