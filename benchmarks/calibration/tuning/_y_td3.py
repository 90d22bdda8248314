"""sfujim/TD3 TD3.py with main.py, shrunk: the Actor (two ReLU layers, max_action * tanh) and the
twin Critic (Q1 and Q2 heads, Q1() for the actor), the TD3 update (target policy smoothing noise
clamped to noise_clip, min of the two target Qs, reward + not_done * discount * target_Q under
no_grad, F.mse_loss(current_Q1, target_Q) + F.mse_loss(current_Q2, target_Q), the delayed actor
update -critic.Q1(state, actor(state)).mean() every policy_freq iterations with Polyak updates of
both targets), two Adam(lr=3e-4) optimizers, main.py's loop (uniform random actions for
start_timesteps, then the policy plus Gaussian exploration noise of expl_noise * max_action, one
train() per environment step after start_timesteps, a ReplayBuffer sampled uniformly) and its
periodic deterministic evaluation. The MuJoCo task is replaced by a small point-mass task written
here (state: position, velocity and target; action: a force in [-1, 1]; reward: minus the
distance to the target minus a small action cost; 40-step episodes); the hidden layers shrink
from 256 to 64, batch 64, start_timesteps 400, 1200 timesteps, evaluation every 200 steps
(5 episodes, their mean return logged as the val metric "return").

`bug` plants one fault (None: the script as published):
- "actor-loss-sign": actor_loss = critic.Q1(state, actor(state)).mean(), without the minus, so
  the actor descends the Q value it should ascend.
"""
from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab

SOURCE = "https://github.com/sfujim/TD3/blob/34770ccdcb51df6f6c7d85c1ba7e40d71b940d16/TD3.py"
BUGS = (None, "actor-loss-sign")
HIDDEN = 64


class PointMass:
    """A 1-D point mass pushed towards a random target."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.max_steps = 40

    def reset(self):
        self.pos, self.vel = self.rng.uniform(-1, 1), 0.0
        self.target, self.t = self.rng.uniform(-1, 1), 0
        return self._obs()

    def _obs(self):
        return np.array([self.pos, self.vel, self.target], dtype=np.float32)

    def step(self, action):
        a = float(np.clip(action[0], -1.0, 1.0))
        self.vel = 0.8 * self.vel + 0.1 * a
        self.pos = float(np.clip(self.pos + self.vel, -2, 2))
        self.t += 1
        reward = -abs(self.pos - self.target) - 0.05 * a * a
        return self._obs(), reward, self.t >= self.max_steps


class Actor(nn.Module):
    def __init__(self, state_dim, action_dim, max_action):
        super().__init__()
        self.l1 = nn.Linear(state_dim, HIDDEN)
        self.l2 = nn.Linear(HIDDEN, HIDDEN)
        self.l3 = nn.Linear(HIDDEN, action_dim)
        self.max_action = max_action

    def forward(self, state):
        a = F.relu(self.l1(state))
        a = F.relu(self.l2(a))
        return self.max_action * torch.tanh(self.l3(a))


class Critic(nn.Module):
    def __init__(self, state_dim, action_dim):
        super().__init__()
        self.l1 = nn.Linear(state_dim + action_dim, HIDDEN)
        self.l2 = nn.Linear(HIDDEN, HIDDEN)
        self.l3 = nn.Linear(HIDDEN, 1)
        self.l4 = nn.Linear(state_dim + action_dim, HIDDEN)
        self.l5 = nn.Linear(HIDDEN, HIDDEN)
        self.l6 = nn.Linear(HIDDEN, 1)

    def forward(self, state, action):
        sa = torch.cat([state, action], 1)
        q1 = self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))
        q2 = self.l6(F.relu(self.l5(F.relu(self.l4(sa)))))
        return q1, q2

    def Q1(self, state, action):
        sa = torch.cat([state, action], 1)
        return self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))


class ReplayBuffer:
    def __init__(self, state_dim, action_dim, rng, max_size=int(1e6)):
        self.max_size, self.ptr, self.size, self.rng = max_size, 0, 0, rng
        self.state = np.zeros((max_size, state_dim), dtype=np.float32)
        self.action = np.zeros((max_size, action_dim), dtype=np.float32)
        self.next_state = np.zeros((max_size, state_dim), dtype=np.float32)
        self.reward = np.zeros((max_size, 1), dtype=np.float32)
        self.not_done = np.zeros((max_size, 1), dtype=np.float32)

    def add(self, state, action, next_state, reward, done):
        self.state[self.ptr], self.action[self.ptr] = state, action
        self.next_state[self.ptr], self.reward[self.ptr] = next_state, reward
        self.not_done[self.ptr] = 1. - done
        self.ptr = (self.ptr + 1) % self.max_size
        self.size = min(self.size + 1, self.max_size)

    def sample(self, batch_size):
        ind = self.rng.integers(0, self.size, size=batch_size)
        return tuple(torch.from_numpy(a[ind]) for a in (self.state, self.action,
                                                       self.next_state, self.reward,
                                                       self.not_done))


class TD3:
    def __init__(self, state_dim, action_dim, max_action, bug, discount=0.99, tau=0.005,
                 policy_noise=0.2, noise_clip=0.5, policy_freq=2):
        self.actor = Actor(state_dim, action_dim, max_action)
        self.actor_target = copy.deepcopy(self.actor)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=3e-4)
        self.critic = Critic(state_dim, action_dim)
        self.critic_target = copy.deepcopy(self.critic)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=3e-4)
        self.max_action, self.discount, self.tau = max_action, discount, tau
        self.policy_noise, self.noise_clip, self.policy_freq = policy_noise, noise_clip, policy_freq
        self.total_it, self.bug = 0, bug

    def select_action(self, state):
        state = torch.FloatTensor(state.reshape(1, -1))
        with torch.no_grad():
            return self.actor(state).numpy().flatten()

    def train(self, replay_buffer, rec, batch_size=64):
        self.total_it += 1
        state, action, next_state, reward, not_done = replay_buffer.sample(batch_size)
        with torch.no_grad():
            noise = (torch.randn_like(action) * self.policy_noise).clamp(-self.noise_clip,
                                                                        self.noise_clip)
            next_action = (self.actor_target(next_state) + noise).clamp(-self.max_action,
                                                                        self.max_action)
            target_Q1, target_Q2 = self.critic_target(next_state, next_action)
            target_Q = torch.min(target_Q1, target_Q2)
            target_Q = reward + not_done * self.discount * target_Q
        current_Q1, current_Q2 = self.critic(state, action)
        critic_loss = F.mse_loss(current_Q1, target_Q) + F.mse_loss(current_Q2, target_Q)
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()
        metrics = {}
        if self.total_it % self.policy_freq == 0:
            q = self.critic.Q1(state, self.actor(state)).mean()
            actor_loss = q if self.bug == "actor-loss-sign" else -q
            self.actor_optimizer.zero_grad()
            actor_loss.backward()
            self.actor_optimizer.step()
            metrics["actor_loss"] = actor_loss.item()
            for param, target_param in zip(self.critic.parameters(),
                                           self.critic_target.parameters()):
                target_param.data.copy_(self.tau * param.data + (1 - self.tau) * target_param.data)
            for param, target_param in zip(self.actor.parameters(),
                                           self.actor_target.parameters()):
                target_param.data.copy_(self.tau * param.data + (1 - self.tau) * target_param.data)
        rec.step(loss=critic_loss, inputs=state, targets=target_Q, outputs=current_Q1,
                 metrics=metrics)


def eval_policy(policy, seed, eval_episodes=5):
    env = PointMass(seed + 100)
    avg_reward = 0.
    for _ in range(eval_episodes):
        state, done = env.reset(), False
        while not done:
            state, reward, done = env.step(policy.select_action(np.array(state)))
            avg_reward += reward
    return avg_reward / eval_episodes


def run(run_dir: str, seed: int = 0, bug: str | None = None, start_timesteps: int = 400,
        max_timesteps: int = 1200, eval_freq: int = 200, expl_noise: float = 0.1) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    env = PointMass(seed)
    state_dim, action_dim, max_action = 3, 1, 1.0
    policy = TD3(state_dim, action_dim, max_action, bug, policy_noise=0.2 * max_action,
                 noise_clip=0.5 * max_action)
    replay_buffer = ReplayBuffer(state_dim, action_dim, rng)
    model = nn.ModuleDict({"actor": policy.actor, "critic": policy.critic})
    with tracelab.Recorder(run_dir, model=model,
                           optimizer={"actor": policy.actor_optimizer,
                                      "critic": policy.critic_optimizer},
                           config={"lr": 3e-4, "discount": 0.99, "tau": 0.005,
                                   "policy_freq": 2, "batch_size": 64,
                                   "start_timesteps": start_timesteps}) as rec:
        state, done = env.reset(), False
        for t in range(max_timesteps):
            if t < start_timesteps:
                action = rng.uniform(-max_action, max_action, size=action_dim)
            else:
                action = (policy.select_action(np.array(state))
                          + rng.normal(0, max_action * expl_noise, size=action_dim)
                          ).clip(-max_action, max_action)
            next_state, reward, done = env.step(action)
            replay_buffer.add(state, action, next_state, reward, 0.0)
            state = next_state
            if done:
                state, done = env.reset(), False
            if t >= start_timesteps:
                policy.train(replay_buffer, rec)
            if (t + 1) % eval_freq == 0:
                rec.log("val", metrics={"return": eval_policy(policy, seed)})
