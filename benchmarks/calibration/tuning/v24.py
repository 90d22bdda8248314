"""aladdinpersson simple CNN; faulty: shuffled images paired with unshuffled labels."""
from _v_aladdin_cnn import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "label-corruption",
    "source": SOURCE,
    "bug_source": "https://github.com/aidotse/LeakPro/issues/315",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="labels-misaligned")
