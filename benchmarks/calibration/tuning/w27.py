"""former CTransformer; faulty: clip_grad_norm_ called after opt.step(), so the updates are not
clipped."""
from _w_former import SOURCE, run as _train

LABEL = {
    "family": "transformer",
    "optimizer": "sgd",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "clip-misuse",
    "source": SOURCE,
    "bug_source": "https://github.com/awslabs/graphstorm/issues/1366",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="clip-after-step")
