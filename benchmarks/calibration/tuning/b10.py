"""b10: Udacity's fc_model Network returning raw scores (no log_softmax) to NLLLoss."""
from _b_udacity_fc import train

LABEL = {"family": "mlp", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "loss-input-contract",
         "source": "https://github.com/udacity/deep-learning-v2-pytorch/blob/c9404fc86181fc3f0906b368697268257f348535/intro-to-pytorch/fc_model.py",
         "bug_source": "https://github.com/yanx27/Pointnet_Pointnet2_pytorch/issues/30"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bug="logits-to-nll")
