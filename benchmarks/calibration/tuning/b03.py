"""b03: The MNIST CNN with every layer but the first conv set to requires_grad=False."""
from _b_tc_mnist import train

LABEL = {"family": "cnn", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "frozen-by-mistake",
         "source": "https://github.com/OrderLab/TrainCheck-Evaluation-Workloads/blob/2de9268be8845dade014e5e065693e4fdd9095d6/silent-issue-detection/bug-reprod-scripts/stackoverflow-60335387/bug.py",
         "bug_source": "https://discuss.pytorch.org/t/obtaining-abnormal-changes-in-loss-and-accuracy/84911"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bug="frozen")
