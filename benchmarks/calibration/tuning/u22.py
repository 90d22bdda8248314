"""jcjohnson recurrent_net; faulty: gradients clipped to norm 1 on a summed loss."""
from _u_jcj_recurrent import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "sgd",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "clip-misuse",
    "source": SOURCE,
    "bug_source": "https://github.com/wandb/senpai/pull/978",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="clip-1")
