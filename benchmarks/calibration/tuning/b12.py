"""b12: Udacity's SentimentRNN (batch-first LSTM, BCELoss, clip_grad_norm_ before step):
healthy."""
from _b_udacity_sentiment import train

LABEL = {"family": "rnn", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": "https://github.com/udacity/deep-learning-v2-pytorch/blob/c9404fc86181fc3f0906b368697268257f348535/sentiment-rnn/Sentiment_RNN_Solution.ipynb",
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed)
