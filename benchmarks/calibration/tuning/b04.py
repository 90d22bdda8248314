"""b04: The MNIST CNN fed uint8 pixels cast to float: never divided by 255 nor normalized."""
from _b_tc_mnist import train

LABEL = {"family": "cnn", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "input-scale",
         "source": "https://github.com/OrderLab/TrainCheck-Evaluation-Workloads/blob/2de9268be8845dade014e5e065693e4fdd9095d6/silent-issue-detection/bug-reprod-scripts/stackoverflow-60335387/bug.py",
         "bug_source": "https://forums.fast.ai/t/lesson-3-book-chapter-4-dividing-by-255/107811"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bug="raw-pixels")
