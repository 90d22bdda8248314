"""sweetice/Deep-reinforcement-learning-with-pytorch Char03 Actor-Critic/AC_CartPole-v0.py,
shrunk: its Policy (a shared Linear(4, 32) + ReLU, an action head with softmax and a value
head), Categorical sampling, discounted returns normalized per episode, the loss
sum(-log_prob * (R - value.item())) + sum(smooth_l1(value, R)) per episode, Adam(lr=0.01), one
update per episode. CartPole is simulated in numpy with its gym dynamics (episodes capped at
100 steps), 120 episodes instead of 20000.

`bug` plants one fault (None: the script as published):
- "actor-sign": the policy term's sign flipped (log_prob * advantage), so the actor minimizes
  the return.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

import tracelab
from _w_data import CartPole

SOURCE = ("https://github.com/sweetice/Deep-reinforcement-learning-with-pytorch/blob/"
          "347e31a86505531fe4c58776e3a81494b5d24ee6/Char03%20Actor-Critic/AC_CartPole-v0.py")
BUGS = (None, "actor-sign")


class Policy(nn.Module):
    def __init__(self, state_space=4, action_space=2):
        super().__init__()
        self.fc1 = nn.Linear(state_space, 32)
        self.action_head = nn.Linear(32, action_space)
        self.value_head = nn.Linear(32, 1)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        return F.softmax(self.action_head(x), dim=-1), self.value_head(x)


def run(run_dir: str, seed: int = 0, bug: str | None = None, episodes: int = 120,
        learning_rate: float = 0.01, gamma: float = 0.99) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    env = CartPole(np.random.default_rng(seed), max_steps=100)
    eps = np.finfo(np.float32).eps.item()
    model = Policy()
    optimizer = optim.Adam(model.parameters(), lr=learning_rate)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer,
                           config={"lr": learning_rate, "gamma": gamma}) as rec:
        for _ in range(episodes):
            state, saved, rewards, states = env.reset(), [], [], []
            while True:
                s = torch.from_numpy(state).float()
                states.append(s)
                probs, state_value = model(s)
                m = Categorical(probs)
                action = m.sample()
                saved.append((m.log_prob(action), state_value))
                state, reward, done, _ = env.step(action.item())
                rewards.append(reward)
                if done:
                    break
            R, returns = 0.0, []
            for r in rewards[::-1]:
                R = r + gamma * R
                returns.insert(0, R)
            returns = torch.tensor(returns)
            returns = (returns - returns.mean()) / (returns.std() + eps)
            policy_loss, value_loss = [], []
            for (log_prob, value), r in zip(saved, returns):
                advantage = r - value.item()
                sign = 1.0 if bug == "actor-sign" else -1.0
                policy_loss.append(sign * log_prob * advantage)
                value_loss.append(F.smooth_l1_loss(value, torch.tensor([r])))
            optimizer.zero_grad()
            loss = torch.stack(policy_loss).sum() + torch.stack(value_loss).sum()
            loss.backward()
            optimizer.step()
            rec.step(loss=loss, inputs=torch.stack(states),
                     metrics={"episode_length": float(len(rewards))})
