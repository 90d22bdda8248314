"""Curt-Park/rainbow-is-all-you-need 01_dqn.py, shrunk: its Network (4-128-128-2 ReLU MLP), the
ReplayBuffer sampled uniformly, a target network hard-updated every 100 updates, epsilon decayed
linearly from 1.0 to 0.1, gamma 0.99, F.smooth_l1_loss on gather(1, action) against
r + gamma * max_a' Q_target(s', a') * (1 - terminated), Adam() with its default lr, batch 32,
memory 10000. CartPole is the gym equations in numpy (_p_data.CartPole); 1600 frames instead of
20000 and epsilon_decay 1/600 instead of 1/2000 so the decay ends within the run.

`bug` (None: the script as published):
- "no-keepdim": next_q_value = dqn_target(next_state).max(dim=1)[0] without keepdim=True, so the
  (32,) next values broadcast against the (32, 1) rewards into a (32, 32) target.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import tracelab
from _p_data import CartPole

SOURCE = ("https://github.com/Curt-Park/rainbow-is-all-you-need/blob/"
          "e864f0be10d028aebcbfac1d48c219813f3d48f9/01_dqn.py")
BUGS = (None, "no-keepdim")


class Network(nn.Module):
    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(in_dim, 128), nn.ReLU(), nn.Linear(128, 128),
                                    nn.ReLU(), nn.Linear(128, out_dim))

    def forward(self, x):
        return self.layers(x)


class ReplayBuffer:
    def __init__(self, obs_dim: int, size: int, batch_size: int, rng):
        self.obs_buf = np.zeros([size, obs_dim], dtype=np.float32)
        self.next_obs_buf = np.zeros([size, obs_dim], dtype=np.float32)
        self.acts_buf, self.rews_buf = np.zeros([size], np.float32), np.zeros([size], np.float32)
        self.term_buf = np.zeros(size, dtype=np.float32)
        self.max_size, self.batch_size, self.ptr, self.size, self.rng = size, batch_size, 0, 0, rng

    def store(self, obs, act, rew, next_obs, terminated):
        self.obs_buf[self.ptr], self.next_obs_buf[self.ptr] = obs, next_obs
        self.acts_buf[self.ptr], self.rews_buf[self.ptr] = act, rew
        self.term_buf[self.ptr] = terminated
        self.ptr = (self.ptr + 1) % self.max_size
        self.size = min(self.size + 1, self.max_size)

    def sample_batch(self):
        idxs = self.rng.choice(self.size, size=self.batch_size, replace=False)
        return dict(obs=self.obs_buf[idxs], next_obs=self.next_obs_buf[idxs],
                    acts=self.acts_buf[idxs], rews=self.rews_buf[idxs],
                    terminated=self.term_buf[idxs])

    def __len__(self):
        return self.size


def run(run_dir: str, seed: int = 0, bug: str | None = None, num_frames: int = 1600) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    env = CartPole(seed)
    memory_size, batch_size, target_update, epsilon_decay = 10000, 32, 100, 1 / 600
    max_epsilon, min_epsilon, gamma = 1.0, 0.1, 0.99
    memory = ReplayBuffer(4, memory_size, batch_size, rng)
    dqn, dqn_target = Network(4, 2), Network(4, 2)
    dqn_target.load_state_dict(dqn.state_dict())
    dqn_target.eval()
    optimizer = optim.Adam(dqn.parameters())
    epsilon, update_cnt, score, scores = max_epsilon, 0, 0.0, []
    config = {"memory_size": memory_size, "batch_size": batch_size, "gamma": gamma,
              "target_update": target_update, "epsilon_decay": epsilon_decay, "lr": 1e-3}
    with tracelab.Recorder(run_dir, model=dqn, optimizer=optimizer,
                           loss_fn=nn.SmoothL1Loss(), config=config) as rec:
        state = env.reset()
        for frame_idx in range(1, num_frames + 1):
            if epsilon > rng.random():
                action = int(rng.integers(2))
            else:
                with torch.no_grad():
                    action = int(dqn(torch.FloatTensor(state)).argmax())
            next_state, reward, done = env.step(action)
            terminated = done and env.t < 500
            memory.store(state, action, reward, next_state, terminated)
            state = next_state
            score += reward
            if done:
                state = env.reset()
                scores.append(score)
                score = 0.0
            if len(memory) >= batch_size:
                samples = memory.sample_batch()
                s = torch.FloatTensor(samples["obs"])
                s2 = torch.FloatTensor(samples["next_obs"])
                a = torch.LongTensor(samples["acts"].reshape(-1, 1))
                r = torch.FloatTensor(samples["rews"].reshape(-1, 1))
                term = torch.FloatTensor(samples["terminated"].reshape(-1, 1))
                curr_q_value = dqn(s).gather(1, a)
                if bug == "no-keepdim":
                    next_q_value = dqn_target(s2).max(dim=1)[0].detach()
                else:
                    next_q_value = dqn_target(s2).max(dim=1, keepdim=True)[0].detach()
                target = r + gamma * next_q_value * (1 - term)
                loss = F.smooth_l1_loss(curr_q_value, target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                update_cnt += 1
                epsilon = max(min_epsilon, epsilon - (max_epsilon - min_epsilon) * epsilon_decay)
                metrics = {"score": float(np.mean(scores[-10:]))} if scores else None
                rec.step(loss=loss, inputs=s, targets=target, outputs=curr_q_value,
                         metrics=metrics)
                if update_cnt % target_update == 0:
                    dqn_target.load_state_dict(dqn.state_dict())
    print(f"    dqn bug={bug}: last 10 episodes {np.mean(scores[-10:]):.1f}, "
          f"episodes {len(scores)}")
