"""pytorch/examples word_language_model: a 2-layer LSTM LM, clipping at 0.25, hand-written SGD;
healthy: the script as published."""
from _a_word_lm import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "manual",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
