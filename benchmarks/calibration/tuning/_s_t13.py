"""seungeunrho/minimalRL, REINFORCE.py: a 4-128-2 policy with a softmax, the return computed
backwards with gamma 0.98, loss -log(prob) * R backpropagated per step and summed over the
episode, Adam; CartPole in numpy, 200 steps at most, lr 1e-3 for the shrunk number of episodes."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Categorical

from _s_common import CartPole, recorder, setup, step


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 128)
        self.fc2 = nn.Linear(128, 2)

    def forward(self, x):
        return F.softmax(self.fc2(F.relu(self.fc1(x))), dim=0)


def train(run_dir: str, seed: int, *, sign: float = -1.0, episodes: int = 200) -> None:
    setup(seed)
    env, pi = CartPole(seed), Policy()
    optimizer = torch.optim.Adam(pi.parameters(), lr=1e-3)
    gamma = 0.98
    with recorder(run_dir, pi, optimizer, config={"lr": 1e-3, "gamma": gamma}) as rec:
        for _ in range(episodes):
            s, done, data, states = env.reset(), False, [], []
            while not done:
                prob = pi(torch.from_numpy(s))
                a = Categorical(prob).sample()
                states.append(s)
                s, r, done = env.step(int(a))
                data.append((r, prob[a]))
            R, total = 0.0, 0.0
            optimizer.zero_grad()
            for r, prob in data[::-1]:
                R = r + gamma * R
                loss = sign * torch.log(prob) * R
                loss.backward()
                total += loss.detach()
            optimizer.step()
            step(rec, loss=total, inputs=torch.tensor(np.array(states)), metrics={"score": len(data)})
