"""pytorch/examples word_language_model: a 2-layer LSTM LM, clipping at 0.25, hand-written SGD;
faulty: the encoder made with Embedding.from_pretrained (freeze=True by default)."""
from _a_word_lm import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "manual",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "frozen-by-mistake",
    "source": SOURCE,
    "bug_source": "https://github.com/RUCAIBox/RecBole/issues/2046",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="frozen-embedding")
