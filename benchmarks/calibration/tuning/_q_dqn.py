"""qfettes/DeepRL-Tutorials 01.DQN (agents/DQN.py's Model with networks/networks.py's DQN head
on network_bodies.py's SimpleBody, utils/hyperparameters.py's Config), shrunk: ReLU(Linear(obs,
128)) body, ReLU(Linear(128, 512)), Linear(512, n_actions); ExperienceReplayMemory sampled
uniformly; compute_loss gathers Q(s, a), builds expected_q_values = r + gamma * max_a'
Q_target(s', a') under torch.no_grad() with zeros for terminal next states (a (batch, 1)
column: zeros(batch).unsqueeze(dim=1)), loss = MSE(diff) = 0.5 * diff ** 2 averaged; Adam;
each parameter's grad clamped to [-1, 1] before optimizer.step(); the target network copied
every TARGET_NET_UPDATE_FREQ updates; epsilon-greedy with exponential decay. Shrunk: Pong
replaced by the cart-pole equations written out (CartPole-v1 dynamics, episodes capped at 200
steps), MAX_FRAMES 2000, LEARN_START 300, TARGET_NET_UPDATE_FREQ 200, epsilon_decay 600 and
LR 1e-3 instead of 1e6, 1e4, 1e3, 3e4 and 1e-4 (a short run on an easy task). The Recorder
gets each update: the TD loss, the batch, Q(s, a) as outputs and the expected values as
targets, and the mean return of the last 10 episodes as a metric.

`bug` plants one fault (None: the script as published):
- "no-unsqueeze": max_next_q_values built as zeros(batch) without .unsqueeze(dim=1) and filled
  with the target net's max(1)[0], so expected_q_values is (batch, batch) and the difference
  with the (batch, 1) Q(s, a) broadcasts.
"""
from __future__ import annotations

import math
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import tracelab

SOURCE = ("https://github.com/qfettes/DeepRL-Tutorials/blob/"
          "25fa0bfe83120f9cbe0fb0f0cb2bcc0cd0744097/agents/DQN.py")
BUGS = (None, "no-unsqueeze")


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


class SimpleBody(nn.Module):
    def __init__(self, input_shape, num_actions):
        super().__init__()
        self.fc1 = nn.Linear(input_shape[0], 128)

    def forward(self, x):
        return F.relu(self.fc1(x))

    def feature_size(self):
        return self.fc1.out_features


class DQN(nn.Module):
    def __init__(self, input_shape, num_actions):
        super().__init__()
        self.body = SimpleBody(input_shape, num_actions)
        self.fc1 = nn.Linear(self.body.feature_size(), 512)
        self.fc2 = nn.Linear(512, num_actions)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(self.body(x))))


class ExperienceReplayMemory:
    def __init__(self, capacity):
        self.capacity = capacity
        self.memory = []

    def push(self, transition):
        self.memory.append(transition)
        if len(self.memory) > self.capacity:
            del self.memory[0]

    def sample(self, batch_size):
        return random.sample(self.memory, batch_size)

    def __len__(self):
        return len(self.memory)


def run(run_dir: str, seed: int = 0, bug: str | None = None, max_frames: int = 2000) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    env = CartPole(np.random.default_rng(seed))
    gamma, lr, batch_size = 0.99, 1e-3, 32
    target_net_update_freq, learn_start, exp_replay_size = 200, 300, 100000
    eps_start, eps_final, eps_decay = 1.0, 0.01, 600
    num_feats, num_actions = (4,), 2
    model, target_model = DQN(num_feats, num_actions), DQN(num_feats, num_actions)
    target_model.load_state_dict(model.state_dict())
    optimizer = optim.Adam(model.parameters(), lr=lr)
    model.train()
    target_model.train()
    memory = ExperienceReplayMemory(exp_replay_size)
    update_count = 0

    def MSE(x):
        return 0.5 * x.pow(2)

    def get_action(s, eps):
        with torch.no_grad():
            if np.random.random() >= eps:
                X = torch.tensor(np.array([s]), dtype=torch.float)
                return model(X).max(1)[1].view(1, 1).item()
            return np.random.randint(0, num_actions)

    config = {"GAMMA": gamma, "LR": lr, "BATCH_SIZE": batch_size,
              "TARGET_NET_UPDATE_FREQ": target_net_update_freq, "LEARN_START": learn_start}
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, config=config) as rec:
        observation, episode_reward, returns = env.reset(), 0.0, []
        ep_len = 0
        for frame_idx in range(1, max_frames + 1):
            epsilon = eps_final + (eps_start - eps_final) * math.exp(-1.0 * frame_idx / eps_decay)
            action = get_action(observation, epsilon)
            prev_observation = observation
            observation, reward, done = env.step(action)
            ep_len += 1
            if ep_len >= 200:
                done = True
            episode_reward += reward
            memory.push((prev_observation, action, reward, None if done else observation))
            if done:
                returns.append(episode_reward)
                observation, episode_reward, ep_len = env.reset(), 0.0, 0
            if frame_idx < learn_start:
                continue
            transitions = memory.sample(batch_size)
            batch_state, batch_action, batch_reward, batch_next_state = zip(*transitions)
            batch_state = torch.tensor(np.array(batch_state), dtype=torch.float).view(-1, 4)
            batch_action = torch.tensor(batch_action, dtype=torch.long).squeeze().view(-1, 1)
            batch_reward = torch.tensor(batch_reward, dtype=torch.float).squeeze().view(-1, 1)
            non_final_mask = torch.tensor(tuple(s is not None for s in batch_next_state),
                                          dtype=torch.bool)
            non_final_next_states = torch.tensor(
                np.array([s for s in batch_next_state if s is not None]),
                dtype=torch.float).view(-1, 4)
            current_q_values = model(batch_state).gather(1, batch_action)
            with torch.no_grad():
                if bug == "no-unsqueeze":
                    max_next_q_values = torch.zeros(batch_size, dtype=torch.float)
                    max_next_q_values[non_final_mask] = target_model(
                        non_final_next_states).max(dim=1)[0]
                else:
                    max_next_q_values = torch.zeros(batch_size, dtype=torch.float).unsqueeze(dim=1)
                    max_next_action = target_model(non_final_next_states).max(dim=1)[1].view(-1, 1)
                    max_next_q_values[non_final_mask] = target_model(
                        non_final_next_states).gather(1, max_next_action)
                expected_q_values = batch_reward + gamma * max_next_q_values
            diff = expected_q_values - current_q_values
            loss = MSE(diff).mean()
            optimizer.zero_grad()
            loss.backward()
            for param in model.parameters():
                param.grad.data.clamp_(-1, 1)
            optimizer.step()
            update_count = (update_count + 1) % target_net_update_freq
            if update_count == 0:
                target_model.load_state_dict(model.state_dict())
            recent = float(np.mean(returns[-10:])) if returns else 0.0
            rec.step(loss=loss, inputs=batch_state, targets=expected_q_values,
                     outputs=current_q_values, metrics={"episode_reward": recent,
                                                        "epsilon": epsilon})
