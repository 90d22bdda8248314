"""pytorch/examples time_sequence_prediction: two LSTMCells per time step, LBFGS; faulty: the
training set built from every wave, the 3 test waves included."""
from _a_time_sequence import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "lbfgs",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "train-val-overlap",
    "source": SOURCE,
    "bug_source": "https://github.com/WingsBrokenAngel/Semantics-AssistedVideoCaptioning/issues/10",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="test-in-train")
