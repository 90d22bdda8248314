"""b02: The MNIST CNN as the question posted it: optimizer.zero_grad() never called."""
from _b_tc_mnist import train

LABEL = {"family": "cnn", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "missing-zero-grad",
         "source": "https://github.com/OrderLab/TrainCheck-Evaluation-Workloads/blob/2de9268be8845dade014e5e065693e4fdd9095d6/silent-issue-detection/bug-reprod-scripts/stackoverflow-60335387/bug.py",
         "bug_source": "https://stackoverflow.com/questions/60335387/pytorch-mnist-example-not-converge"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bug="missing-zero-grad")
