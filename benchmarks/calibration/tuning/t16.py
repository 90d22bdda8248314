"""gabrielloye LSTM_Sentiment-Analysis, a 2-layer LSTM with sigmoid + BCELoss, Adam, clipping: as
published."""
from _t_lstm_sentiment import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": True,
    "cause": None,
    "source": SOURCE,
    "bug_source": None,
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug=None)
