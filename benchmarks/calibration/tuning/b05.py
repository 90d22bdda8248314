"""b05: The MNIST CNN validated on images without the training Normalize()."""
from _b_tc_mnist import train

LABEL = {"family": "cnn", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "train-val-preprocessing-mismatch",
         "source": "https://github.com/OrderLab/TrainCheck-Evaluation-Workloads/blob/2de9268be8845dade014e5e065693e4fdd9095d6/silent-issue-detection/bug-reprod-scripts/stackoverflow-60335387/bug.py",
         "bug_source": "http://stackoverflow.com/questions/20570029/neural-network-model-fails-to-predict-outer-world-data"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bug="val-unnormalized")
