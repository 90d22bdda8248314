"""b38: cleanrl's PPO without newvalue.view(-1): (N, 1) values broadcast against (N,) returns
in the value loss."""
from _b_cleanrl_ppo import train

LABEL = {"family": "rl", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "shape-broadcast",
         "source": "https://github.com/vwxyzjn/cleanrl/blob/fe8d8a03c41a7ef5b523e2e354bd01c363e786bb/cleanrl/ppo.py",
         "bug_source": "https://github.com/RLinf/RLinf/issues/1568"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bug="value-not-flattened")
