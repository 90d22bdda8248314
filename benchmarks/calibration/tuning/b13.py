"""b13: Udacity's SentimentRNN with the LSTM built without batch_first=True: batch-first
tensors read as time-first."""
from _b_udacity_sentiment import train

LABEL = {"family": "rnn", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "wrong-batch-axis",
         "source": "https://github.com/udacity/deep-learning-v2-pytorch/blob/c9404fc86181fc3f0906b368697268257f348535/sentiment-rnn/Sentiment_RNN_Solution.ipynb",
         "bug_source": "https://discuss.pytorch.org/t/lstm-change-batch-first-true-loss-does-not-decrease/62364"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bug="seq-first")
