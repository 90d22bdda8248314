"""pytorch/examples reinforcement_learning/reinforce.py, shrunk: its Policy (Linear(4, 128),
Dropout(0.6), ReLU, Linear(128, 2), softmax), Adam(lr=1e-2), returns discounted with gamma 0.99
and standardized, the loss sum(-log_prob * R) over the episode, one optimizer step per
episode. gymnasium's CartPole-v1 is replaced by the same cart-pole equations written out below
(no gymnasium needed), episodes capped at 100 steps instead of 500, 120 episodes.

`bug` plants one fault (None: the script as published):
- "ascent": the policy loss written as log_prob * R (sign flipped): the optimizer makes the
  actions with high returns less likely.
"""
from __future__ import annotations

import math
from collections import deque

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

import tracelab

SOURCE = ("https://github.com/pytorch/examples/blob/77f55b912142e11fcfdf5b530231fb9c52f181e8/"
          "reinforcement_learning/reinforce.py")
BUGS = (None, "ascent")


class CartPole:
    """gymnasium's CartPole-v1 dynamics (Euler steps of 0.02 s, reward 1 per step)."""

    def __init__(self, rng: np.random.Generator, max_steps: int = 100):
        self.rng, self.max_steps = rng, max_steps

    def reset(self) -> np.ndarray:
        self.state, self.t = self.rng.uniform(-0.05, 0.05, 4), 0
        return self.state.astype(np.float32)

    def step(self, action: int) -> tuple[np.ndarray, float, bool]:
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        self.state = np.array([x + 0.02 * x_dot, x_dot + 0.02 * x_acc,
                               theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc])
        self.t += 1
        done = (abs(self.state[0]) > 2.4 or abs(self.state[2]) > 12 * 2 * math.pi / 360
                or self.t >= self.max_steps)
        return self.state.astype(np.float32), 1.0, done


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(4, 128)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(128, 2)

    def forward(self, x):
        x = F.relu(self.dropout(self.affine1(x)))
        return F.softmax(self.affine2(x), dim=1)


def run(run_dir: str, seed: int = 0, bug: str | None = None, episodes: int = 120,
        gamma: float = 0.99) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    env = CartPole(np.random.default_rng(seed))
    policy = Policy()
    optimizer = optim.Adam(policy.parameters(), lr=1e-2)
    eps = np.finfo(np.float32).eps.item()
    with tracelab.Recorder(run_dir, model=policy, optimizer=optimizer,
                           config={"lr": 1e-2, "gamma": gamma}) as rec:
        running_reward = 10.0
        for _ in range(episodes):
            state, done = env.reset(), False
            states, log_probs, rewards = [], [], []
            while not done:
                x = torch.from_numpy(state).unsqueeze(0)
                m = Categorical(policy(x))
                action = m.sample()
                log_probs.append(m.log_prob(action))
                states.append(x)
                state, reward, done = env.step(action.item())
                rewards.append(reward)
            running_reward = 0.05 * sum(rewards) + 0.95 * running_reward
            R, returns = 0.0, deque()
            for r in rewards[::-1]:
                R = r + gamma * R
                returns.appendleft(R)
            returns = torch.tensor(returns)
            returns = (returns - returns.mean()) / (returns.std() + eps)
            sign = 1.0 if bug == "ascent" else -1.0
            policy_loss = torch.cat([sign * lp * R for lp, R in zip(log_probs, returns)]).sum()
            optimizer.zero_grad()
            policy_loss.backward()
            optimizer.step()
            rec.step(loss=policy_loss, inputs=torch.cat(states),
                     metrics={"episode_reward": float(sum(rewards)),
                              "running_reward": running_reward})
