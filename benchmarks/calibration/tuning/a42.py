"""pytorch/examples word_language_model: a 2-layer LSTM LM, clipping at 0.25, hand-written SGD;
faulty: clip_grad_norm_ left out at lr 20."""
from _a_word_lm import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "manual",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "exploding-gradients",
    "source": SOURCE,
    "bug_source": "https://github.com/asappresearch/sru/issues/2",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-clip")
