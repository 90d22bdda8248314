"""dsgiitr/d2l-pytorch concise LSTM; faulty: batch-first one-hot input fed to the
sequence-first nn.LSTM."""
from _x_d2l_lstm import SOURCE, run as _train

LABEL = {"family": "rnn", "optimizer": "sgd", "loss_reduction": "mean",
         "healthy": False, "cause": "wrong-batch-axis", "source": SOURCE,
         "bug_source": "https://github.com/ChiWeiHsiao/DeepVO-pytorch/issues/32"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="batch-first")
