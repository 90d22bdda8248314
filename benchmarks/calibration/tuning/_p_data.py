"""Offline data for the p-scenarios: the NYU spiral, scikit-learn's 8x8 digits as small uint8
images, and a classic CartPole (the gym equations) in numpy."""
from __future__ import annotations

import math

import numpy as np
import torch
from sklearn.datasets import load_digits


def spiral(seed: int, n: int = 1000, c: int = 3):
    """NYU-DLSP20 04-spiral_classification's data: c arms of n points in 2-D."""
    g = torch.Generator().manual_seed(seed)
    x = torch.zeros(n * c, 2)
    y = torch.zeros(n * c, dtype=torch.long)
    for k in range(c):
        t = torch.linspace(0, 1, n)
        inner = torch.linspace((2 * math.pi / c) * k, (2 * math.pi / c) * (2 + k), n) \
            + torch.randn(n, generator=g) * 0.2
        x[n * k:n * (k + 1), 0] = t * torch.sin(inner)
        x[n * k:n * (k + 1), 1] = t * torch.cos(inner)
        y[n * k:n * (k + 1)] = k
    return x, y


def digits(seed: int, n_val: int = 300):
    """(train, train labels, val, val labels): uint8 images (N, 1, 8, 8) in 0-255."""
    bunch = load_digits()
    images = torch.from_numpy(bunch.images * (255.0 / 16.0)).float()[:, None]
    images = images.round().clamp(0, 255).to(torch.uint8)
    order = torch.from_numpy(np.random.default_rng(seed).permutation(len(images)))
    images, labels = images[order], torch.from_numpy(bunch.target)[order]
    return images[n_val:], labels[n_val:], images[:n_val], labels[:n_val]


class CartPole:
    """gym's CartPole-v1 dynamics; reward 1 per step, done past 12 degrees, 2.4 m or 500 steps."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.state, self.t = None, 0

    def reset(self) -> np.ndarray:
        self.state, self.t = self.rng.uniform(-0.05, 0.05, 4), 0
        return self.state.astype(np.float32)

    def step(self, action: int):
        x, x_dot, th, th_dot = self.state
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(th), math.sin(th)
        temp = (force + 0.05 * th_dot ** 2 * sin) / 1.1
        th_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * th_acc * cos / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * x_acc
        th, th_dot = th + 0.02 * th_dot, th_dot + 0.02 * th_acc
        self.state, self.t = np.array([x, x_dot, th, th_dot]), self.t + 1
        done = abs(x) > 2.4 or abs(th) > 12 * 2 * math.pi / 360 or self.t >= 500
        return self.state.astype(np.float32), 1.0, done
