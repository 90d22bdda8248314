"""sweetice actor-critic; faulty: the policy loss sign flipped, the actor minimizes the return."""
from _w_ac import SOURCE, run as _train

LABEL = {
    "family": "rl",
    "optimizer": "adam",
    "loss_reduction": "sum",
    "healthy": False,
    "cause": "wrong-loss-sign",
    "source": SOURCE,
    "bug_source": "https://github.com/KanishJebaMathewM/Truxify/pull/11885",
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="actor-sign")
