"""Shawn1993 CNN_Text; faulty: the dev set evaluated without model.eval(), dropout active."""
from _w_cnn_text import SOURCE, run as _train

LABEL = {
    "family": "cnn",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "eval-in-train-mode",
    "source": SOURCE,
    "bug_source": "https://github.com/SeanNaren/deepspeech.pytorch/pull/22",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="eval-no-eval-mode")
