"""pranz24/pytorch-soft-actor-critic (main.py, sac.py, model.py, replay_memory.py), shrunk: the
twin QNetwork and its soft-updated target (tau=0.005), the GaussianPolicy (tanh-squashed
Normal, log_std clamped to [-20, 2], the log-likelihood corrected by log(action_scale *
(1 - y^2) + 1e-6)), F.mse_loss on both Q heads against r + mask * gamma * (min target Q -
alpha * log pi), policy loss (alpha * log pi - min Q).mean(), three Adam(lr=3e-4) optimizers
(critic, policy, and log_alpha with automatic entropy tuning), random actions for the first
start_steps, one update per environment step, a deterministic evaluation every few episodes.
MuJoCo becomes a 1-D point mass reaching a random target (state: position and target;
action in [-2, 2] moves it by 0.1 * action; reward -|position - target|; 25 steps an episode),
hidden 256 and batch 256 become 64, start_steps 10000 becomes 200, 1M steps 1000; the
Normal is built without argument validation, as torch did before 1.8.

`bug` plants one fault (None: the script as published):
- "log-scaled-action": the tanh correction written as log(1 - action^2 + 1e-6) on the
  rescaled action (|action| up to 2), as in the thread: the log of a negative number;
- "reward-1d": reward_batch left without .unsqueeze(1), so r (N,) + mask * gamma * Q (N, 1)
  broadcasts to an (N, N) target that F.mse_loss compares with each (N, 1) Q.
"""
from __future__ import annotations

import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal

import tracelab

SOURCE = ("https://github.com/pranz24/pytorch-soft-actor-critic/blob/"
          "c1805660b3961694be54079a355155a5cad492f5/sac.py")
BUGS = (None, "log-scaled-action", "reward-1d")
LOG_SIG_MAX, LOG_SIG_MIN, epsilon = 2, -20, 1e-6


def weights_init_(m):
    if isinstance(m, nn.Linear):
        torch.nn.init.xavier_uniform_(m.weight, gain=1)
        torch.nn.init.constant_(m.bias, 0)


class QNetwork(nn.Module):
    def __init__(self, num_inputs, num_actions, hidden_dim):
        super().__init__()
        self.linear1 = nn.Linear(num_inputs + num_actions, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, hidden_dim)
        self.linear3 = nn.Linear(hidden_dim, 1)
        self.linear4 = nn.Linear(num_inputs + num_actions, hidden_dim)
        self.linear5 = nn.Linear(hidden_dim, hidden_dim)
        self.linear6 = nn.Linear(hidden_dim, 1)
        self.apply(weights_init_)

    def forward(self, state, action):
        xu = torch.cat([state, action], 1)
        x1 = self.linear3(F.relu(self.linear2(F.relu(self.linear1(xu)))))
        x2 = self.linear6(F.relu(self.linear5(F.relu(self.linear4(xu)))))
        return x1, x2


class GaussianPolicy(nn.Module):
    def __init__(self, num_inputs, num_actions, hidden_dim, high, low, bug=None):
        super().__init__()
        self.linear1 = nn.Linear(num_inputs, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, hidden_dim)
        self.mean_linear = nn.Linear(hidden_dim, num_actions)
        self.log_std_linear = nn.Linear(hidden_dim, num_actions)
        self.apply(weights_init_)
        self.action_scale = torch.tensor((high - low) / 2.0)
        self.action_bias = torch.tensor((high + low) / 2.0)
        self.bug = bug

    def forward(self, state):
        x = F.relu(self.linear2(F.relu(self.linear1(state))))
        mean = self.mean_linear(x)
        log_std = torch.clamp(self.log_std_linear(x), min=LOG_SIG_MIN, max=LOG_SIG_MAX)
        return mean, log_std

    def sample(self, state):
        mean, log_std = self.forward(state)
        normal = Normal(mean, log_std.exp(), validate_args=False)  # torch < 1.8 did not validate
        x_t = normal.rsample()
        y_t = torch.tanh(x_t)
        action = y_t * self.action_scale + self.action_bias
        log_prob = normal.log_prob(x_t)
        if self.bug == "log-scaled-action":
            log_prob -= torch.log(1 - action.pow(2) + epsilon)
        else:
            log_prob -= torch.log(self.action_scale * (1 - y_t.pow(2)) + epsilon)
        log_prob = log_prob.sum(1, keepdim=True)
        mean = torch.tanh(mean) * self.action_scale + self.action_bias
        return action, log_prob, mean


class PointEnv:
    """A 1-D point mass that should reach a target: state (position, target)."""
    high, low, max_steps = 2.0, -2.0, 25

    def __init__(self, rng):
        self.rng = rng

    def reset(self):
        self.pos, self.target, self.t = self.rng.uniform(-1, 1), self.rng.uniform(-1, 1), 0
        return np.array([self.pos, self.target], dtype=np.float32)

    def step(self, action):
        self.pos = float(np.clip(self.pos + 0.1 * float(action[0]), -2, 2))
        self.t += 1
        reward = -abs(self.pos - self.target)
        return np.array([self.pos, self.target], dtype=np.float32), reward, self.t >= self.max_steps


def soft_update(target, source, tau):
    for target_param, param in zip(target.parameters(), source.parameters()):
        target_param.data.copy_(target_param.data * (1.0 - tau) + param.data * tau)


def run(run_dir: str, seed: int = 0, bug: str | None = None, num_steps: int = 1000) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng, rand = np.random.default_rng(seed), random.Random(seed)
    env, eval_env = PointEnv(rng), PointEnv(np.random.default_rng(seed + 1))
    gamma, tau, lr, hidden, batch_size, start_steps = 0.99, 0.005, 3e-4, 64, 64, 200
    critic = QNetwork(2, 1, hidden)
    critic_target = QNetwork(2, 1, hidden)
    critic_target.load_state_dict(critic.state_dict())
    policy = GaussianPolicy(2, 1, hidden, env.high, env.low,
                            bug=bug if bug == "log-scaled-action" else None)
    critic_optim = torch.optim.Adam(critic.parameters(), lr=lr)
    policy_optim = torch.optim.Adam(policy.parameters(), lr=lr)
    target_entropy = -1.0
    log_alpha = torch.zeros(1, requires_grad=True)
    alpha_optim = torch.optim.Adam([log_alpha], lr=lr)
    alpha = log_alpha.exp().item()
    memory = []
    model = nn.ModuleDict({"critic": critic, "policy": policy})
    with tracelab.Recorder(run_dir, model=model,
                           optimizer={"critic": critic_optim, "policy": policy_optim,
                                      "alpha": alpha_optim},
                           loss_fn=nn.MSELoss(),
                           config={"lr": lr, "gamma": gamma, "tau": tau,
                                   "batch_size": batch_size, "start_steps": start_steps,
                                   "automatic_entropy_tuning": True}) as rec:
        total, episode = 0, 0
        while total < num_steps:
            state, done = env.reset(), False
            episode += 1
            while not done:
                if total < start_steps:
                    action = rng.uniform(env.low, env.high, 1).astype(np.float32)
                else:
                    with torch.no_grad():
                        action = policy.sample(torch.from_numpy(state)[None])[0][0].numpy()
                if len(memory) > batch_size:
                    batch = rand.sample(memory, batch_size)
                    s, a, r, s2, m = (torch.tensor(np.array(x), dtype=torch.float32)
                                      for x in zip(*batch))
                    r = r if bug == "reward-1d" else r.unsqueeze(1)
                    m = m.unsqueeze(1)
                    with torch.no_grad():
                        next_action, next_log_pi, _ = policy.sample(s2)
                        q1_t, q2_t = critic_target(s2, next_action)
                        min_q_t = torch.min(q1_t, q2_t) - alpha * next_log_pi
                        next_q_value = r + m * gamma * min_q_t
                    qf1, qf2 = critic(s, a)
                    qf_loss = F.mse_loss(qf1, next_q_value) + F.mse_loss(qf2, next_q_value)
                    critic_optim.zero_grad()
                    qf_loss.backward()
                    critic_optim.step()
                    pi, log_pi, _ = policy.sample(s)
                    qf1_pi, qf2_pi = critic(s, pi)
                    policy_loss = ((alpha * log_pi) - torch.min(qf1_pi, qf2_pi)).mean()
                    policy_optim.zero_grad()
                    policy_loss.backward()
                    policy_optim.step()
                    alpha_loss = -(log_alpha * (log_pi + target_entropy).detach()).mean()
                    alpha_optim.zero_grad()
                    alpha_loss.backward()
                    alpha_optim.step()
                    alpha = log_alpha.exp().item()
                    soft_update(critic_target, critic, tau)
                    rec.step(loss=qf_loss, inputs=s, targets=next_q_value, outputs=qf1,
                             metrics={"policy_loss": policy_loss.item(),
                                      "alpha_loss": alpha_loss.item(), "alpha": alpha})
                next_state, reward, done = env.step(action)
                total += 1
                mask = 1.0 if env.t == env.max_steps else float(not done)
                memory.append((state, action, reward, next_state, mask))
                state = next_state
            if episode % 5 == 0:
                avg = 0.0
                for _ in range(5):
                    st, dn = eval_env.reset(), False
                    while not dn:
                        with torch.no_grad():
                            act = policy.sample(torch.from_numpy(st)[None])[2][0].numpy()
                        st, rw, dn = eval_env.step(act)
                        avg += rw
                rec.log("val", metrics={"avg_reward": avg / 5})
