"""gabrielloye LSTM_Sentiment-Analysis, a 2-layer LSTM with sigmoid + BCELoss, Adam, clipping:
faulty: the model rebuilt after the optimizer, which steps the first model's parameters."""
from _t_lstm_sentiment import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'optimizer-step-missing',
    "source": SOURCE,
    "bug_source": 'https://github.com/pytorch/pytorch/issues/54765',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='model-rebuilt')
