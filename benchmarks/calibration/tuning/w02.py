"""pytorch-beginner CNN; faulty: the model ends in a softmax and CrossEntropyLoss gets
probabilities."""
from _w_beginner_cnn import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "loss-input-contract",
    "source": SOURCE,
    "bug_source": "https://github.com/nishnik/Deep-Semantic-Similarity-Model-PyTorch/issues/2",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="softmax-ce")
