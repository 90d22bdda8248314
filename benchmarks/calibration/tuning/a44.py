"""pytorch/examples word_language_model: a 2-layer LSTM LM, clipping at 0.25, hand-written SGD;
faulty: --use-optimizer: AdamW at the script's lr of 20 meant for plain SGD."""
from _a_word_lm import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "lr-too-high",
    "source": SOURCE,
    "bug_source": "https://github.com/salesforce/awd-lstm-lm/issues/50",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="adamw-lr20")
