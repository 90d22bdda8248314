"""b01: The MNIST CNN of Stack Overflow 60335387 with its fix (zero_grad each batch):
healthy."""
from _b_tc_mnist import train

LABEL = {"family": "cnn", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": "https://github.com/OrderLab/TrainCheck-Evaluation-Workloads/blob/2de9268be8845dade014e5e065693e4fdd9095d6/silent-issue-detection/bug-reprod-scripts/stackoverflow-60335387/bug.py",
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed)
