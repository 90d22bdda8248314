"""mlflow Iris classifier; faulty: the training rows shuffled apart from their labels."""
from _w_iris import SOURCE, run as _train

LABEL = {
    "family": "tabular",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "label-corruption",
    "source": SOURCE,
    "bug_source": "https://github.com/DrexelChatbotGroup/DrexelChatbot/issues/15",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="shuffle-x-only")
