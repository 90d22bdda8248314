"""wiseodd generative-models vanilla VAE (bare parameters, Adam, summed BCE + KL): faulty: the grads
never reset after the step."""
from _t_vae import SOURCE, run as _train

LABEL = {
    "family": "vae",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": 'missing-zero-grad',
    "source": SOURCE,
    "bug_source": 'https://github.com/jcjohnson/pytorch-examples/issues/31',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='no-zero')
