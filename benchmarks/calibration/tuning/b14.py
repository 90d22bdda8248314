"""b14: Udacity's SentimentRNN with clip_grad_norm_ called after optimizer.step()."""
from _b_udacity_sentiment import train

LABEL = {"family": "rnn", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "clip-misuse",
         "source": "https://github.com/udacity/deep-learning-v2-pytorch/blob/c9404fc86181fc3f0906b368697268257f348535/sentiment-rnn/Sentiment_RNN_Solution.ipynb",
         "bug_source": "https://theneuralbase.com/pytorch/learn/intermediate/gradient-exploding-gradient-clipping/"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bug="clip-after-step")
