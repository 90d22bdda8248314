"""b37: cleanrl's PPO with Adam given only the actor's parameters: the critic is in no
optimizer."""
from _b_cleanrl_ppo import train

LABEL = {"family": "rl", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "param-not-in-optimizer",
         "source": "https://github.com/vwxyzjn/cleanrl/blob/fe8d8a03c41a7ef5b523e2e354bd01c363e786bb/cleanrl/ppo.py",
         "bug_source": "https://github.com/SforAiDl/genrl/issues/315"}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed, bug="actor-only-optimizer")
