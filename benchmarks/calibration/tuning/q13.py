"""salesforce/awd-lstm-lm; faulty: clip_grad_norm_ called after optimizer.step()."""
from _q_awd import SOURCE, run as _train

LABEL = {
    "family": "rnn",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "clip-misuse",
    "source": SOURCE,
    "bug_source": "https://github.com/taesunwhang/UMS-ResSel/issues/3",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="clip-after-step")
