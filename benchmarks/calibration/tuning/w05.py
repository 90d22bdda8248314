"""pytorch-beginner LSTM; faulty: nn.LSTM built without batch_first=True, fed (batch, seq,
feature) batches."""
from _w_beginner_rnn import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "wrong-batch-axis",
    "source": SOURCE,
    "bug_source": "https://github.com/Cadene/vqa.pytorch/issues/40",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-batch-first")
