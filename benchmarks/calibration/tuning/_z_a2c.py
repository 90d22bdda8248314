"""ikostrikov/pytorch-a2c-ppo-acktr-gail, --algo a2c on a classic-control task, shrunk:
a2c_ppo_acktr/model.py's Policy with MLPBase (separate actor and critic towers of two 64-unit
tanh layers, orthogonal init with gain sqrt(2), critic_linear), distributions.py's Categorical
head (orthogonal init, gain 0.01), storage.py's RolloutStorage returns (gamma 0.99, no GAE),
algo/a2c_acktr.py's update (value_loss * 0.5 + action_loss - dist_entropy * 0.01,
clip_grad_norm_(0.5), RMSprop(lr 7e-4, eps 1e-5, alpha 0.99)) and main.py's loop (num_steps 5).
The environments are 8 numpy CartPoles (no gym; the script's default is 16); 500 updates; lr
raised to 2e-3 so a few seconds show learning.

`bug` plants one fault (None: the script as published):
- "entropy-sign": the entropy bonus added to the loss instead of subtracted
  (value_loss * 0.5 + action_loss + dist_entropy * 0.01), so the policy is pushed to collapse
  onto one action early;
- "lr-high": RMSprop's lr set to 0.1.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn

import tracelab
from _z_data import CartPole

SOURCE = ("https://github.com/ikostrikov/pytorch-a2c-ppo-acktr-gail/blob/"
          "41332b78dfb50321c29bade65f9d244387f68a60/a2c_ppo_acktr/algo/a2c_acktr.py")
BUGS = (None, "entropy-sign", "lr-high")


def init(module, weight_init, bias_init, gain=1.0):
    weight_init(module.weight.data, gain=gain)
    bias_init(module.bias.data)
    return module


class MLPBase(nn.Module):
    def __init__(self, num_inputs, hidden_size=64):
        super().__init__()
        init_ = lambda m: init(m, nn.init.orthogonal_, lambda x: nn.init.constant_(x, 0),
                               np.sqrt(2))
        self.actor = nn.Sequential(init_(nn.Linear(num_inputs, hidden_size)), nn.Tanh(),
                                   init_(nn.Linear(hidden_size, hidden_size)), nn.Tanh())
        self.critic = nn.Sequential(init_(nn.Linear(num_inputs, hidden_size)), nn.Tanh(),
                                    init_(nn.Linear(hidden_size, hidden_size)), nn.Tanh())
        self.critic_linear = init_(nn.Linear(hidden_size, 1))

    def forward(self, inputs):
        return self.critic_linear(self.critic(inputs)), self.actor(inputs)


class Categorical(nn.Module):
    def __init__(self, num_inputs, num_outputs):
        super().__init__()
        self.linear = init(nn.Linear(num_inputs, num_outputs), nn.init.orthogonal_,
                           lambda x: nn.init.constant_(x, 0), gain=0.01)

    def forward(self, x):
        return torch.distributions.Categorical(logits=self.linear(x))


class Policy(nn.Module):
    def __init__(self, obs_dim, n_actions):
        super().__init__()
        self.base = MLPBase(obs_dim)
        self.dist = Categorical(64, n_actions)

    def act(self, inputs):
        value, actor_features = self.base(inputs)
        dist = self.dist(actor_features)
        action = dist.sample()
        return value, action

    def evaluate_actions(self, inputs, action):
        value, actor_features = self.base(inputs)
        dist = self.dist(actor_features)
        return value, dist.log_prob(action).unsqueeze(-1), dist.entropy().mean()


def run(run_dir: str, seed: int = 0, bug: str | None = None, updates: int = 500) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    n_envs, num_steps, gamma = 8, 5, 0.99
    value_loss_coef, entropy_coef, max_grad_norm = 0.5, 0.01, 0.5
    lr, eps, alpha = (0.1 if bug == "lr-high" else 2e-3), 1e-5, 0.99
    envs = [CartPole(seed * 100 + i) for i in range(n_envs)]
    obs = torch.tensor(np.stack([e.reset() for e in envs]))
    ac = Policy(4, 2)
    optimizer = torch.optim.RMSprop(ac.parameters(), lr, eps=eps, alpha=alpha)
    ep_ret = np.zeros(n_envs)
    finished = []
    config = {"algo": "a2c", "lr": lr, "eps": eps, "alpha": alpha, "gamma": gamma,
              "num_steps": num_steps, "num_processes": n_envs, "value_loss_coef": value_loss_coef,
              "entropy_coef": entropy_coef, "max_grad_norm": max_grad_norm}
    with tracelab.Recorder(run_dir, model=ac, optimizer=optimizer, config=config) as rec:
        for _ in range(updates):
            obs_buf, act_buf, rew_buf, mask_buf = [], [], [], []
            for _ in range(num_steps):
                with torch.no_grad():
                    _, action = ac.act(obs)
                next_obs, rewards, masks = [], [], []
                for i, env in enumerate(envs):
                    o, r, done = env.step(int(action[i]))
                    ep_ret[i] += r
                    if done:
                        finished.append(ep_ret[i])
                        ep_ret[i] = 0.0
                        o = env.reset()
                    next_obs.append(o)
                    rewards.append(r)
                    masks.append(0.0 if done else 1.0)
                obs_buf.append(obs)
                act_buf.append(action)
                rew_buf.append(torch.tensor(rewards, dtype=torch.float32).unsqueeze(1))
                mask_buf.append(torch.tensor(masks, dtype=torch.float32).unsqueeze(1))
                obs = torch.tensor(np.stack(next_obs))
            with torch.no_grad():
                next_value = ac.base(obs)[0]
            returns = [None] * num_steps
            ret = next_value
            for step in reversed(range(num_steps)):
                ret = ret * gamma * mask_buf[step] + rew_buf[step]
                returns[step] = ret
            b_obs = torch.cat(obs_buf)
            b_act = torch.cat(act_buf)
            b_ret = torch.cat(returns)
            values, action_log_probs, dist_entropy = ac.evaluate_actions(b_obs, b_act)
            advantages = b_ret - values
            value_loss = advantages.pow(2).mean()
            action_loss = -(advantages.detach() * action_log_probs).mean()
            optimizer.zero_grad()
            loss = value_loss * value_loss_coef + action_loss - dist_entropy * entropy_coef
            if bug == "entropy-sign":
                loss = value_loss * value_loss_coef + action_loss + dist_entropy * entropy_coef
            loss.backward()
            nn.utils.clip_grad_norm_(ac.parameters(), max_grad_norm)
            optimizer.step()
            recent = float(np.mean(finished[-10:])) if finished else 0.0
            rec.step(loss=loss, inputs=b_obs, targets=b_ret, outputs=values,
                     metrics={"value_loss": value_loss, "action_loss": action_loss,
                              "dist_entropy": dist_entropy, "episode_return": recent})
