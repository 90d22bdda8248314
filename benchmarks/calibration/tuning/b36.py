"""b36: cleanrl's PPO on CartPole (annealed Adam, clip_grad_norm_ 0.5, GAE): healthy."""
from _b_cleanrl_ppo import train

LABEL = {"family": "rl", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": True, "cause": None,
         "source": "https://github.com/vwxyzjn/cleanrl/blob/fe8d8a03c41a7ef5b523e2e354bd01c363e786bb/cleanrl/ppo.py",
         "bug_source": None}


def run(run_dir: str, seed: int = 0) -> None:
    train(run_dir, seed)
