"""gabrielloye LSTM_Sentiment-Analysis, a 2-layer LSTM with sigmoid + BCELoss, Adam, clipping:
faulty: Adam(lr=1.0)."""
from _t_lstm_sentiment import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'lr-too-high',
    "source": SOURCE,
    "bug_source": 'https://github.com/OpenNMT/OpenNMT-py/issues/253',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='adam-lr-1')
