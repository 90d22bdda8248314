"""p-christ/Deep-Reinforcement-Learning-Algorithms-with-PyTorch agents/DQN_agents/DQN.py (with
Base_Agent.take_optimisation_step and the CartPole hyperparameters of results/Cart_Pole.py),
shrunk: a Q network with hidden layers [30, 15] (ReLU), epsilon-greedy with
epsilon = 1 / (1 + episode / 1), a replay buffer, one learning iteration per environment step,
Q targets r + 0.99 * max Q(s') * (1 - done) computed under no_grad, F.mse_loss,
Adam(lr=0.01), and take_optimisation_step's zero_grad / backward / clip_grad_norm_(0.7) / step.
pick_action() puts the network in eval mode and back in train mode. The environment is
CartPole written out in numpy; the run stops after 1500 environment steps; batch 64 (of 256).

`bug` (None: as published):
- "lr": a learning rate of 1.0 for Adam, 100 times the config's.
"""
from __future__ import annotations

import random
from collections import deque

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import tracelab
from _x_data import CartPole

SOURCE = ("https://github.com/p-christ/Deep-Reinforcement-Learning-Algorithms-with-PyTorch/"
          "blob/0867d4244b56b2ec6deef6aa528440114bb914c6/agents/DQN_agents/DQN.py")
BUGS = (None, "lr")


def run(run_dir: str, seed: int = 0, bug: str | None = None, total_steps: int = 1500) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    random.seed(seed)
    env = CartPole(seed)
    hp = {"learning_rate": 1.0 if bug == "lr" else 0.01, "batch_size": 64,
          "buffer_size": 40000, "discount_rate": 0.99, "gradient_clipping_norm": 0.7,
          "linear_hidden_units": [30, 15], "update_every_n_steps": 1, "learning_iterations": 1}
    q = nn.Sequential(nn.Linear(4, 30), nn.ReLU(), nn.Linear(30, 15), nn.ReLU(), nn.Linear(15, 2))
    optimizer = optim.Adam(q.parameters(), lr=hp["learning_rate"])
    memory = deque(maxlen=hp["buffer_size"])
    episode, step, returns = 0, 0, []
    with tracelab.Recorder(run_dir, model=q, optimizer=optimizer, loss_fn=nn.MSELoss(),
                           config=hp) as rec:
        while step < total_steps:
            state, done, ret = env.reset(), False, 0.0
            while not done and step < total_steps:
                q.eval()
                with torch.no_grad():
                    values = q(torch.from_numpy(state).unsqueeze(0))
                q.train()
                epsilon = 1.0 / (1.0 + episode)
                action = random.randint(0, 1) if random.random() < epsilon \
                    else int(values.argmax())
                next_state, reward, done = env.step(action)
                ret += reward
                if len(memory) >= hp["batch_size"]:
                    batch = random.sample(memory, hp["batch_size"])
                    s, a, r, s2, d = (torch.tensor(np.array(v), dtype=torch.float32)
                                      for v in zip(*batch))
                    a, r, d = a.unsqueeze(1), r.unsqueeze(1), d.unsqueeze(1)
                    with torch.no_grad():
                        q_next = q(s2).detach().max(1)[0].unsqueeze(1)
                        q_targets = r + hp["discount_rate"] * q_next * (1 - d)
                    q_expected = q(s).gather(1, a.long())
                    loss = F.mse_loss(q_expected, q_targets)
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(q.parameters(), hp["gradient_clipping_norm"])
                    optimizer.step()
                    metrics = {"episode_return": returns[-1]} if returns else None
                    rec.step(loss=loss, inputs=s, metrics=metrics, targets=q_targets,
                             outputs=q_expected)
                memory.append((state, action, reward, next_state, float(done)))
                state = next_state
                step += 1
            returns.append(ret)
            episode += 1
