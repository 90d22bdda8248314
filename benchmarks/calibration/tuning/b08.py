"""b08: Udacity's fc_model loop without the model.train() after validation: trains in eval
mode."""
from _b_udacity_fc import train

LABEL = {"family": "mlp", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "train-in-eval-mode",
         "source": "https://github.com/udacity/deep-learning-v2-pytorch/blob/c9404fc86181fc3f0906b368697268257f348535/intro-to-pytorch/fc_model.py",
         "bug_source": "https://github.com/fartashf/vsepp/issues/4"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bug="no-train-after-val")
