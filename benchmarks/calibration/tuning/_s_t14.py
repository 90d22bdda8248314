"""seungeunrho/minimalRL, actor_critic.py: a shared 4-256 layer with a policy and a value head,
TD(0) targets over 10-step rollouts, loss -log(pi_a) * delta + smooth_l1(v, td_target), mean,
Adam; CartPole in numpy, 200 steps at most, 128 wide, lr 1e-3 for the shrunk number of episodes."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Categorical

from _s_common import CartPole, recorder, setup, step


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 128)
        self.fc_pi = nn.Linear(128, 2)
        self.fc_v = nn.Linear(128, 1)

    def pi(self, x, softmax_dim=0):
        return F.softmax(self.fc_pi(F.relu(self.fc1(x))), dim=softmax_dim)

    def v(self, x):
        return self.fc_v(F.relu(self.fc1(x)))


def train(run_dir: str, seed: int, *, detach_value: bool = False, episodes: int = 250) -> None:
    setup(seed)
    env, model = CartPole(seed), ActorCritic()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    gamma, n_rollout = 0.98, 10
    with recorder(run_dir, model, optimizer, config={"lr": 1e-3, "gamma": gamma, "n_rollout": n_rollout}) as rec:
        for _ in range(episodes):
            s, done, length = env.reset(), False, 0
            while not done:
                rows = []
                for _ in range(n_rollout):
                    a = int(Categorical(model.pi(torch.from_numpy(s))).sample())
                    s_prime, r, done = env.step(a)
                    rows.append((s, a, r / 100.0, s_prime, 0.0 if done else 1.0))
                    s, length = s_prime, length + 1
                    if done:
                        break
                st = torch.tensor(np.array([row[0] for row in rows]))
                a = torch.tensor([[row[1]] for row in rows])
                r = torch.tensor([[row[2]] for row in rows])
                sp = torch.tensor(np.array([row[3] for row in rows]))
                mask = torch.tensor([[row[4]] for row in rows])
                td_target = r + gamma * model.v(sp) * mask
                delta = td_target - model.v(st)
                pi_a = model.pi(st, softmax_dim=1).gather(1, a)
                value = model.v(st).detach() if detach_value else model.v(st)
                loss = -torch.log(pi_a) * delta.detach() + F.smooth_l1_loss(value, td_target.detach())
                optimizer.zero_grad()
                loss.mean().backward()
                optimizer.step()
                step(rec, loss=loss.mean(), inputs=st, targets=td_target.detach(), outputs=value,
                     metrics={"score": length} if done else None)
