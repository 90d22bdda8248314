"""pytorch/examples time_sequence_prediction: two LSTMCells per time step, LBFGS; healthy: the
script as published."""
from _a_time_sequence import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "lbfgs",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
