"""dsgiitr/d2l-pytorch dropout MLP; faulty: training features shuffled, their labels not."""
from _x_d2l_mlp import SOURCE, run as _train

LABEL = {"family": "mlp", "optimizer": "sgd", "loss_reduction": "mean",
         "healthy": False, "cause": "label-corruption", "source": SOURCE,
         "bug_source": "https://github.com/Borda/kaggle_image-classify/pull/12"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="shuffled-labels")
