"""hyunwoongko encoder-decoder Transformer; faulty: the attention mask filled with -1e-12 (the code
before its fix), so the decoder sees the token it must predict."""
from _u_hw_transformer import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "data-leak",
    "source": SOURCE,
    "bug_source": "https://github.com/hyunwoongko/transformer/issues/10",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="mask-eps")
