"""c14: makemore's MLP whose batch targets come from other words than its inputs."""
from _c_makemore import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "label-corruption",
    "source": SOURCE,
    "bug_source": "https://github.com/tensorflow/tensorflow/issues/21033",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="y-unpaired")
