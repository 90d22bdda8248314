"""Bundled data standing in for the downloads of the x-scripts: scikit-learn's 8x8 digits
(as a small MNIST/CIFAR), its breast-cancer table (as a small Adult census), a generated
character corpus, and a CartPole written out in numpy (no gym)."""
from __future__ import annotations

import math

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer, load_digits


def digits(seed: int, n_val: int = 300):
    """(train x, train y, val x, val y): float images (N, 1, 8, 8) in 0-1 and int64 labels."""
    bunch = load_digits()
    images = (bunch.images / 16.0).astype(np.float32)[:, None]
    order = np.random.default_rng(seed).permutation(len(images))
    x, y = torch.from_numpy(images[order]), torch.from_numpy(bunch.target[order]).long()
    return x[n_val:], y[n_val:], x[:n_val], y[:n_val]


def cancer(seed: int, val_frac: float = 0.25):
    """(train x, train y, val x, val y): the raw 30 features (units spanning 1e-3..1e3) and 0/1
    float targets."""
    bunch = load_breast_cancer()
    order = np.random.default_rng(seed).permutation(len(bunch.target))
    x = torch.from_numpy(bunch.data[order].astype(np.float32))
    y = torch.from_numpy(bunch.target[order].astype(np.float32))
    n_val = int(len(y) * val_frac)
    return x[n_val:], y[n_val:], x[:n_val], y[:n_val]


def corpus(seed: int, n_chars: int = 6000) -> str:
    """A text of simple sentences drawn from a small grammar (stands in for the time machine)."""
    rng = np.random.default_rng(seed)
    subj = ["the time traveller", "the psychologist", "the medical man", "filby", "weena"]
    verb = ["said", "saw", "looked at", "thought of", "walked to"]
    obj = ["the machine", "the sphinx", "the morlocks", "the garden", "the future"]
    out = []
    while sum(len(s) for s in out) < n_chars:
        out.append(f"{subj[rng.integers(5)]} {verb[rng.integers(5)]} {obj[rng.integers(5)]}. ")
    return "".join(out)[:n_chars]


def batches(n: int, batch_size: int, generator: torch.Generator):
    """A shuffled epoch of index batches (DataLoader(shuffle=True), last batch kept)."""
    return list(torch.randperm(n, generator=generator).split(batch_size))


class CartPole:
    """gym's CartPole-v0 dynamics: 4 floats of state, 2 actions, reward 1 per step, done when
    the pole falls past 12 degrees, the cart leaves +-2.4, or after 200 steps."""

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
        done = abs(x) > 2.4 or abs(theta) > 12 * 2 * math.pi / 360 or self.t >= 200
        return self.state.astype(np.float32), 1.0, done
