"""b39: Udacity's fc_model Network six hidden layers deep (ReLU, dropout 0.1): healthy."""
from _b_udacity_fc import train

LABEL = {"family": "mlp", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": "https://github.com/udacity/deep-learning-v2-pytorch/blob/c9404fc86181fc3f0906b368697268257f348535/intro-to-pytorch/fc_model.py",
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, hidden_layers=(64,) * 6, drop_p=0.1)
