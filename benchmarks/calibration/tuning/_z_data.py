"""Bundled data standing in for the downloads of the z-scripts: scikit-learn's 8x8 digits (as a
small MNIST/ImageNet/dSprites), a generated two-class token corpus (as a small GLUE task), and a
CartPole written out in numpy (no gym). Nothing is downloaded."""
from __future__ import annotations

import math

import numpy as np
import torch
from sklearn.datasets import load_digits


def digits(seed: int, n_val: int = 300):
    """(train x, train y, val x, val y): float images (N, 1, 8, 8) in 0-1 and int64 labels."""
    bunch = load_digits()
    images = (bunch.images / 16.0).astype(np.float32)[:, None]
    order = np.random.default_rng(seed).permutation(len(images))
    x, y = torch.from_numpy(images[order]), torch.from_numpy(bunch.target[order]).long()
    return x[n_val:], y[n_val:], x[:n_val], y[:n_val]


def sentences(seed: int, n: int = 1200, length: int = 16, vocab: int = 50, n_val: int = 300):
    """A two-class sequence task: token ids (N, length) with 0 as [CLS]; class 1 sentences carry
    more tokens of the 'positive' half of the vocabulary. Returns train ids, labels, val ids,
    labels."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    ids = np.empty((n, length), dtype=np.int64)
    half = (vocab - 1) // 2
    for i in range(n):
        p_pos = 0.65 if y[i] == 1 else 0.35
        pos = rng.random(length) < p_pos
        ids[i] = np.where(pos, 1 + rng.integers(0, half, length),
                          1 + half + rng.integers(0, vocab - 1 - half, length))
    ids[:, 0] = 0
    x, t = torch.from_numpy(ids), torch.from_numpy(y).long()
    return x[n_val:], t[n_val:], x[:n_val], t[:n_val]


def batches(n: int, batch_size: int, generator: torch.Generator):
    """A shuffled epoch of index batches (DataLoader(shuffle=True), last batch kept)."""
    return list(torch.randperm(n, generator=generator).split(batch_size))


class CartPole:
    """gym's CartPole-v1 dynamics: 4 floats of state, 2 actions, reward 1 per step, done when the
    pole falls past 12 degrees, the cart leaves +-2.4, or after 500 steps."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.state = None
        self.t = 0

    def reset(self) -> np.ndarray:
        self.state = self.rng.uniform(-0.05, 0.05, 4)
        self.t = 0
        return self.state.astype(np.float32)

    def step(self, action: int):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * x_acc
        theta, theta_dot = theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc
        self.state = np.array([x, x_dot, theta, theta_dot])
        self.t += 1
        done = abs(x) > 2.4 or abs(theta) > 12 * 2 * math.pi / 360 or self.t >= 500
        return self.state.astype(np.float32), 1.0, done
