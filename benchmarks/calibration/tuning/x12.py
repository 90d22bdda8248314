"""dsgiitr/d2l-pytorch concise LSTM language model, SGD with gradient clipping, as published."""
from _x_d2l_lstm import SOURCE, run as _train

LABEL = {"family": "rnn", "optimizer": "sgd", "loss_reduction": "mean",
         "healthy": True, "cause": None, "source": SOURCE, "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
