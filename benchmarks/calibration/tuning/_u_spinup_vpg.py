"""openai/spinningup spinup/algos/pytorch/vpg/vpg.py with core.py's MLPActorCritic, shrunk: a
categorical policy MLP (tanh, hidden 64x64) and a value MLP (hidden 64x64), the VPGBuffer with
GAE-Lambda advantages (gamma 0.99, lam 0.97) normalized per epoch, rewards-to-go as value
targets, loss_pi = -(logp * adv).mean() with one Adam(pi_lr) step per epoch, then train_v_iters
= 80 Adam(vf_lr=1e-3) steps on ((v(obs) - ret)**2).mean(). gym's CartPole is replaced by the
cart-pole equations written out (CartPole-v1 dynamics), max_ep_len 200, 250 steps per epoch
instead of 4000, 40 epochs instead of 50, pi_lr 1e-2 instead of 3e-4 (a few short epochs
instead of a long MuJoCo run), no MPI; actions sampled from the Categorical's logits directly. The Recorder gets one step per epoch: the policy
loss, with the value loss and the mean episode return as metrics.

`bug` plants one fault (None: the script as published):
- "ascent": loss_pi = (logp * adv).mean(), the minus sign left out;
- "v-unflattened": the value head's output not squeezed (the (N, 1) column the code's
  "Critical: make sure to flatten this!" warns of) against (N,) returns in the value loss.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.signal
import torch
import torch.nn as nn
from torch.distributions.categorical import Categorical
from torch.optim import Adam

import tracelab

SOURCE = ("https://github.com/openai/spinningup/blob/09213516ff7b8f6cb3235ad43b97815d3a6811db/"
          "spinup/algos/pytorch/vpg/vpg.py")
BUGS = (None, "ascent", "v-unflattened")


class CartPole:
    """CartPole-v1 dynamics (Euler steps of 0.02 s, reward 1 per step)."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def reset(self) -> np.ndarray:
        self.state = self.rng.uniform(-0.05, 0.05, 4)
        return self.state.astype(np.float32)

    def step(self, action: int):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        self.state = np.array([x + 0.02 * x_dot, x_dot + 0.02 * x_acc,
                               theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc])
        done = abs(self.state[0]) > 2.4 or abs(self.state[2]) > 12 * 2 * math.pi / 360
        return self.state.astype(np.float32), 1.0, done


def discount_cumsum(x, discount):
    return scipy.signal.lfilter([1], [1, float(-discount)], x[::-1], axis=0)[::-1]


def mlp(sizes, activation, output_activation=nn.Identity):
    layers = []
    for j in range(len(sizes) - 1):
        act = activation if j < len(sizes) - 2 else output_activation
        layers += [nn.Linear(sizes[j], sizes[j + 1]), act()]
    return nn.Sequential(*layers)


class MLPCategoricalActor(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden_sizes, activation):
        super().__init__()
        self.logits_net = mlp([obs_dim] + list(hidden_sizes) + [act_dim], activation)

    def forward(self, obs, act=None):
        pi = Categorical(logits=self.logits_net(obs))
        return pi, (None if act is None else pi.log_prob(act))


class MLPCritic(nn.Module):
    def __init__(self, obs_dim, hidden_sizes, activation, flatten=True):
        super().__init__()
        self.v_net = mlp([obs_dim] + list(hidden_sizes) + [1], activation)
        self.flatten = flatten

    def forward(self, obs):
        v = self.v_net(obs)
        return torch.squeeze(v, -1) if self.flatten else v  # Critical to ensure v has right shape.


class MLPActorCritic(nn.Module):
    def __init__(self, obs_dim=4, act_dim=2, hidden_sizes=(64, 64), activation=nn.Tanh,
                 flatten=True):
        super().__init__()
        self.pi = MLPCategoricalActor(obs_dim, act_dim, hidden_sizes, activation)
        self.v = MLPCritic(obs_dim, hidden_sizes, activation, flatten)

    def step(self, obs):
        # the Categorical's sample and log_prob, computed from its logits (faster per step)
        with torch.no_grad():
            logp = torch.log_softmax(self.pi.logits_net(obs), -1)
            a = int(torch.multinomial(logp.exp(), 1))
            v = self.v(obs)
        return a, float(v.reshape(-1)[0]), float(logp[a])


def run(run_dir: str, seed: int = 0, bug: str | None = None, steps_per_epoch: int = 250,
        epochs: int = 40, gamma: float = 0.99, lam: float = 0.97, pi_lr: float = 1e-2,
        vf_lr: float = 1e-3, train_v_iters: int = 80, max_ep_len: int = 200) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    np.random.seed(seed)
    env = CartPole(np.random.default_rng(seed))
    ac = MLPActorCritic(flatten=bug != "v-unflattened")
    pi_optimizer = Adam(ac.pi.parameters(), lr=pi_lr)
    vf_optimizer = Adam(ac.v.parameters(), lr=vf_lr)

    def compute_loss_pi(data):
        pi, logp = ac.pi(data["obs"], data["act"])
        adv = data["adv"]
        return (logp * adv).mean() if bug == "ascent" else -(logp * adv).mean()

    def compute_loss_v(data):
        return ((ac.v(data["obs"]) - data["ret"]) ** 2).mean()

    n = steps_per_epoch
    config = {"pi_lr": pi_lr, "vf_lr": vf_lr, "gamma": gamma, "lam": lam,
              "steps_per_epoch": n, "train_v_iters": train_v_iters}
    with tracelab.Recorder(run_dir, model=ac, optimizer={"pi": pi_optimizer, "v": vf_optimizer},
                           config=config) as rec:
        o, ep_ret, ep_len = env.reset(), 0, 0
        returns = []
        for epoch in range(epochs):
            obs_buf = np.zeros((n, 4), dtype=np.float32)
            act_buf, adv_buf, rew_buf, ret_buf, val_buf = (np.zeros(n, dtype=np.float32)
                                                           for _ in range(5))
            path_start = 0
            for t in range(n):
                a, v, logp = ac.step(torch.as_tensor(o, dtype=torch.float32))
                next_o, r, d = env.step(a)
                ep_ret += r
                ep_len += 1
                obs_buf[t], act_buf[t], rew_buf[t], val_buf[t] = o, a, r, v
                o = next_o
                timeout = ep_len == max_ep_len
                terminal = d or timeout
                if terminal or t == n - 1:
                    if d and not timeout:
                        v = 0.0
                    else:
                        _, v, _ = ac.step(torch.as_tensor(o, dtype=torch.float32))
                    sl = slice(path_start, t + 1)
                    rews = np.append(rew_buf[sl], v)
                    vals = np.append(val_buf[sl], v)
                    deltas = rews[:-1] + gamma * vals[1:] - vals[:-1]
                    adv_buf[sl] = discount_cumsum(deltas, gamma * lam)
                    ret_buf[sl] = discount_cumsum(rews, gamma)[:-1]
                    path_start = t + 1
                    if terminal:
                        returns.append(ep_ret)
                    o, ep_ret, ep_len = env.reset(), 0, 0
            adv_buf = (adv_buf - adv_buf.mean()) / adv_buf.std()
            data = {"obs": torch.as_tensor(obs_buf), "act": torch.as_tensor(act_buf),
                    "ret": torch.as_tensor(ret_buf), "adv": torch.as_tensor(adv_buf)}
            pi_optimizer.zero_grad()
            loss_pi = compute_loss_pi(data)
            loss_pi.backward()
            pi_optimizer.step()
            for _ in range(train_v_iters):
                vf_optimizer.zero_grad()
                loss_v = compute_loss_v(data)
                loss_v.backward()
                vf_optimizer.step()
            with torch.no_grad():
                values = ac.v(data["obs"])
            recent = float(np.mean(returns[-10:])) if returns else 0.0
            rec.step(loss=loss_pi, inputs=data["obs"], targets=data["ret"], outputs=values,
                     metrics={"loss_v": loss_v, "ep_ret": recent})
