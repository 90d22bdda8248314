"""ShangtongZhang/DeepRL A2CAgent with the a2c_feature config of examples.py, shrunk: a
CategoricalActorCriticNet (an FCBody of two 64-unit ReLU layers shared by a 1e-3-scaled actor
and critic head), five workers, rollout_length 5, discount 0.99, no GAE, entropy_weight 0.01,
value_loss_weight 1, clip_grad_norm_(gradient_clip=0.5), RMSprop(lr=0.001); the step() of
A2C_agent.py (n-step returns bootstrapped from the critic, advantages and returns detached,
policy_loss = -(log_prob * adv).mean(), value_loss = 0.5 * (ret - v)^2 mean). CartPole is a
small numpy copy of gym's CartPole-v0 (200-step limit). Every 50 updates the mean return of the
last finished episodes is logged.

`bug` is None: the agent as published (healthy only; a twin without zero_grad() was dropped:
with clipping at 0.5 and RMSprop it learned as well as this one).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab

SOURCE = ("https://github.com/ShangtongZhang/DeepRL/blob/0fbf8f15f2835b14b93758a90dde7db39662529a/"
          "deep_rl/agent/A2C_agent.py")
BUGS = (None,)


class CartPoles:
    """num_envs CartPole-v0 copies, reset on termination (DeepRL's Task auto-resets)."""

    def __init__(self, num_envs: int, seed: int):
        self.rng = np.random.default_rng(seed)
        self.n = num_envs
        self.state = self.rng.uniform(-0.05, 0.05, size=(num_envs, 4))
        self.t = np.zeros(num_envs, dtype=int)
        self.ret = np.zeros(num_envs)

    def step(self, actions):
        x, x_dot, th, th_dot = self.state.T
        force = np.where(actions == 1, 10.0, -10.0)
        cos, sin = np.cos(th), np.sin(th)
        temp = (force + 0.05 * th_dot ** 2 * sin) / 1.1
        th_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * th_acc * cos / 1.1
        self.state = np.stack([x + 0.02 * x_dot, x_dot + 0.02 * x_acc,
                               th + 0.02 * th_dot, th_dot + 0.02 * th_acc], axis=1)
        self.t += 1
        self.ret += 1.0
        fell = (np.abs(self.state[:, 0]) > 2.4) | (np.abs(self.state[:, 2]) > 12 * 2 * math.pi / 360)
        done = fell | (self.t >= 200)
        finished = list(self.ret[done])
        for i in np.nonzero(done)[0]:
            self.state[i] = self.rng.uniform(-0.05, 0.05, size=4)
            self.t[i], self.ret[i] = 0, 0.0
        rewards = np.ones(self.n)
        return self.state.copy(), rewards, fell.astype(np.float64), finished


def layer_init(layer, w_scale=1.0):
    nn.init.orthogonal_(layer.weight.data)
    layer.weight.data.mul_(w_scale)
    nn.init.constant_(layer.bias.data, 0)
    return layer


class FCBody(nn.Module):
    def __init__(self, state_dim, hidden_units=(64, 64), gate=F.relu):
        super().__init__()
        dims = (state_dim,) + hidden_units
        self.layers = nn.ModuleList([layer_init(nn.Linear(i, o)) for i, o in zip(dims[:-1], dims[1:])])
        self.gate = gate
        self.feature_dim = dims[-1]

    def forward(self, x):
        for layer in self.layers:
            x = self.gate(layer(x))
        return x


class CategoricalActorCriticNet(nn.Module):
    def __init__(self, state_dim, action_dim, phi_body):
        super().__init__()
        self.phi_body = phi_body
        self.fc_action = layer_init(nn.Linear(phi_body.feature_dim, action_dim), 1e-3)
        self.fc_critic = layer_init(nn.Linear(phi_body.feature_dim, 1), 1e-3)

    def forward(self, obs, action=None):
        phi = self.phi_body(torch.as_tensor(obs, dtype=torch.float32))
        logits = self.fc_action(phi)
        v = self.fc_critic(phi)
        dist = torch.distributions.Categorical(logits=logits)
        if action is None:
            action = dist.sample()
        return {'a': action, 'log_pi_a': dist.log_prob(action).unsqueeze(-1),
                'ent': dist.entropy().unsqueeze(-1), 'v': v, 'logits': logits}


def run(run_dir: str, seed: int = 0, bug: str | None = None, updates: int = 1200) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    num_workers, rollout_length, discount = 5, 5, 0.99
    entropy_weight, value_loss_weight, gradient_clip = 0.01, 1.0, 0.5
    task = CartPoles(num_workers, seed)
    network = CategoricalActorCriticNet(4, 2, FCBody(4))
    optimizer = torch.optim.RMSprop(network.parameters(), 0.001)
    config = {"lr": 0.001, "num_workers": num_workers, "rollout_length": rollout_length,
              "discount": discount, "entropy_weight": entropy_weight,
              "gradient_clip": gradient_clip}
    returns_seen: list[float] = []
    states = task.state.copy()
    with tracelab.Recorder(run_dir, model=network, optimizer=optimizer, config=config) as rec:
        for update in range(updates):
            storage = []
            obs_seen = []
            for _ in range(rollout_length):
                prediction = network(states)
                obs_seen.append(torch.as_tensor(states, dtype=torch.float32))
                next_states, rewards, terminals, finished = task.step(prediction['a'].numpy())
                returns_seen.extend(finished)
                prediction['r'] = torch.tensor(rewards, dtype=torch.float32).unsqueeze(-1)
                prediction['m'] = torch.tensor(1 - terminals, dtype=torch.float32).unsqueeze(-1)
                storage.append(prediction)
                states = next_states
            prediction = network(states)
            returns = prediction['v'].detach()
            advs, rets = [None] * rollout_length, [None] * rollout_length
            for i in reversed(range(rollout_length)):
                returns = storage[i]['r'] + discount * storage[i]['m'] * returns
                advs[i] = (returns - storage[i]['v'].detach()).detach()
                rets[i] = returns.detach()
            log_prob = torch.cat([s['log_pi_a'] for s in storage])
            value = torch.cat([s['v'] for s in storage])
            entropy = torch.cat([s['ent'] for s in storage])
            returns, advantages = torch.cat(rets), torch.cat(advs)
            policy_loss = -(log_prob * advantages).mean()
            value_loss = 0.5 * (returns - value).pow(2).mean()
            entropy_loss = entropy.mean()
            optimizer.zero_grad()
            loss = policy_loss - entropy_weight * entropy_loss + value_loss_weight * value_loss
            loss.backward()
            nn.utils.clip_grad_norm_(network.parameters(), gradient_clip)
            optimizer.step()
            rec.step(loss=loss, inputs=torch.cat(obs_seen), targets=returns, outputs=value,
                     metrics={"policy_loss": policy_loss, "value_loss": value_loss,
                              "entropy": entropy_loss})
            if (update + 1) % 50 == 0:
                recent = float(np.mean(returns_seen[-20:])) if returns_seen else 0.0
                rec.log("val", metrics={"episode_return": recent})
