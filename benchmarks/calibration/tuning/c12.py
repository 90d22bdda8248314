"""c12: makemore's MLP with learning rate 5e-8."""
from _c_makemore import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-too-low",
    "source": SOURCE,
    "bug_source": "https://github.com/OpenLMLab/LOMO/issues/50",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="lr-low")
