"""c07: Morvan's regression net without BatchNorm: 8 tanh layers, N(0, 0.1) weights, bias -0.2."""
from _c_morvan_bn import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": "vanishing-gradients",
    "source": SOURCE,
    "bug_source": "https://github.com/Sunnydreamrain/IndRNN_Theano_Lasagne/issues/1",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="no-bn")
