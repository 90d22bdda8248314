"""spro char-rnn-generation; faulty: decoder.zero_grad() left out."""
from _w_spro import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "missing-zero-grad",
    "source": SOURCE,
    "bug_source": "https://github.com/Miraclelucy/dive_into_deep_learning/issues/6",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-zero-grad")
