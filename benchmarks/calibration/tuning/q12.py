"""salesforce/awd-lstm-lm: the regularized LSTM language model with SGD(lr=30) and
clip_grad_norm_(0.25), as published."""
from _q_awd import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
