"""graykode Transformer; faulty: the decoder's subsequent mask left out, so it sees the next target
token."""
from _v_graykode_transformer import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "data-leak",
    "source": SOURCE,
    "bug_source": "https://github.com/alex-matton/causal-transformer-decoder/issues/1",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-subsequent-mask")
