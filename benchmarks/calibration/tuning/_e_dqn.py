"""higgsfield/RL-Adventure "2.double dqn.ipynb", shrunk: the same DQN (Linear(4, 128), ReLU,
Linear(128, 128), ReLU, Linear(128, 2)), a current and a target model (update_target copies the
state dict every 100 frames), ReplayBuffer(1000) sampled uniformly, epsilon_by_frame decaying from
1.0 to 0.01 with decay 500, Adam() with its default lr, batch 32, gamma 0.99 and compute_td_loss
as published: the double-DQN target (the current model picks the next action, the target model
values it) detached through .data, loss = (q_value - expected).pow(2).mean(), one update per
frame once the buffer holds more than 32 transitions.

Shrunk: 2,500 frames for 10,000; gym's CartPole-v0 written out (the same equations of motion,
thresholds and 200-step limit; gym is absent), its reset drawn from the run's seed. Every
episode's return is recorded as a "val" row (metric "episode_reward"; a random policy averages
about 22); the TD loss is recorded per update with the batch's states, Q-values of the actions
taken and their targets."""
from __future__ import annotations

import math
import random
from collections import deque

import numpy as np
import torch
from torch import nn, optim

import tracelab

SOURCE = ("https://github.com/higgsfield/RL-Adventure/blob/"
          "0f82b6922e8a1a8515fc4c84c28702e7caa226f1/2.double%20dqn.ipynb")


class CartPole:
    """gym's CartPole-v0 dynamics (Euler integration, 200-step limit)."""

    def __init__(self, rng: np.random.Generator):
        self.rng, self.state, self.t = rng, None, 0

    def reset(self):
        self.state, self.t = self.rng.uniform(-0.05, 0.05, size=4), 0
        return self.state.astype(np.float32)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        costheta, sintheta = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sintheta) / 1.1
        thetaacc = ((9.8 * sintheta - costheta * temp)
                    / (0.5 * (4.0 / 3.0 - 0.1 * costheta ** 2 / 1.1)))
        xacc = temp - 0.05 * thetaacc * costheta / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * xacc
        theta, theta_dot = theta + 0.02 * theta_dot, theta_dot + 0.02 * thetaacc
        self.state, self.t = np.array([x, x_dot, theta, theta_dot]), self.t + 1
        done = bool(x < -2.4 or x > 2.4 or theta < -12 * 2 * math.pi / 360
                    or theta > 12 * 2 * math.pi / 360 or self.t >= 200)
        return self.state.astype(np.float32), 1.0, done


class ReplayBuffer:
    def __init__(self, capacity, rnd):
        self.buffer, self.rnd = deque(maxlen=capacity), rnd

    def push(self, state, action, reward, next_state, done):
        self.buffer.append((np.expand_dims(state, 0), action, reward,
                            np.expand_dims(next_state, 0), done))

    def sample(self, batch_size):
        state, action, reward, next_state, done = zip(*self.rnd.sample(self.buffer, batch_size))
        return np.concatenate(state), action, reward, np.concatenate(next_state), done

    def __len__(self):
        return len(self.buffer)


class DQN(nn.Module):
    def __init__(self, num_inputs, num_actions):
        super().__init__()
        self.num_actions = num_actions
        self.layers = nn.Sequential(nn.Linear(num_inputs, 128), nn.ReLU(),
                                    nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, num_actions))

    def forward(self, x):
        return self.layers(x)

    def act(self, state, epsilon, rnd):
        if rnd.random() > epsilon:
            with torch.no_grad():
                return int(self.forward(torch.FloatTensor(state).unsqueeze(0)).max(1)[1][0])
        return rnd.randrange(self.num_actions)


def run(run_dir: str, seed: int = 0, num_frames: int = 2500, batch_size: int = 32,
        gamma: float = 0.99) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rnd = random.Random(seed)
    env = CartPole(np.random.default_rng(seed))
    epsilon_by_frame = lambda i: 0.01 + (1.0 - 0.01) * math.exp(-1. * i / 500)  # noqa: E731
    current_model, target_model = DQN(4, 2), DQN(4, 2)
    optimizer = optim.Adam(current_model.parameters())
    replay_buffer = ReplayBuffer(1000, rnd)
    target_model.load_state_dict(current_model.state_dict())
    config = {"lr": 1e-3, "batch_size": batch_size, "gamma": gamma, "buffer": 1000,
              "target_update": 100, "epsilon_decay": 500}
    with tracelab.Recorder(run_dir, model=current_model, optimizer=optimizer,
                           config=config) as rec:
        state, episode_reward = env.reset(), 0.0
        for frame_idx in range(1, num_frames + 1):
            action = current_model.act(state, epsilon_by_frame(frame_idx), rnd)
            next_state, reward, done = env.step(action)
            replay_buffer.push(state, action, reward, next_state, done)
            state = next_state
            episode_reward += reward
            if done:
                rec.log("val", metrics={"episode_reward": episode_reward})
                state, episode_reward = env.reset(), 0.0
            if len(replay_buffer) > batch_size:
                s, a, r, s2, d = replay_buffer.sample(batch_size)
                s, s2 = torch.FloatTensor(np.float32(s)), torch.FloatTensor(np.float32(s2))
                a, r, d = torch.LongTensor(a), torch.FloatTensor(r), torch.FloatTensor(d)
                q_values = current_model(s)
                next_q_values = current_model(s2)
                next_q_state_values = target_model(s2)
                q_value = q_values.gather(1, a.unsqueeze(1)).squeeze(1)
                next_q_value = next_q_state_values.gather(
                    1, torch.max(next_q_values, 1)[1].unsqueeze(1)).squeeze(1)
                expected_q_value = r + gamma * next_q_value * (1 - d)
                loss = (q_value - expected_q_value.data).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=s, outputs=q_value, targets=expected_q_value.data,
                         metrics={"epsilon": epsilon_by_frame(frame_idx)})
            if frame_idx % 100 == 0:
                target_model.load_state_dict(current_model.state_dict())
