"""Bundled data standing in for the downloads of the v-scripts: scikit-learn's 8x8 digits as a
small MNIST (uint8 pixels 0-255), scikit-learn's diabetes table as a small tabular regression
with one categorical column, and the cart-pole equations of motion (no gym)."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_diabetes, load_digits


def digits(seed: int, n_val: int = 297, size: int = 8):
    """(train images, train labels, val images, val labels): uint8 images (N, 1, size, size)
    in 0-255 (bilinearly upsampled from 8x8 when size > 8), int64 labels, split by `seed`."""
    bunch = load_digits()
    images = torch.from_numpy(bunch.images * (255.0 / 16.0)).float()[:, None]
    if size != 8:
        images = F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
    images = images.round().clamp(0, 255).to(torch.uint8)
    order = torch.from_numpy(np.random.default_rng(seed).permutation(len(images)))
    images, labels = images[order], torch.from_numpy(bunch.target)[order]
    return images[n_val:], labels[n_val:], images[:n_val], labels[:n_val]


def to_tensor(images: torch.Tensor) -> torch.Tensor:
    """torchvision's ToTensor(): uint8 0-255 to float 0-1."""
    return images.float() / 255.0


def batches(n: int, batch_size: int, generator: torch.Generator, drop_last: bool = False):
    """A shuffled epoch of index batches (DataLoader(shuffle=True))."""
    parts = list(torch.randperm(n, generator=generator).split(batch_size))
    if drop_last and len(parts[-1]) < batch_size:
        parts = parts[:-1]
    return parts


def diabetes(seed: int, n_val: int = 92):
    """scikit-learn's diabetes table in raw units (age in years, BMI, blood pressure, six serum
    measurements) with `sex` as a categorical column (0/1) and the disease progression target.
    Returns (train frame, val frame) as dicts of numpy columns, split by `seed`."""
    bunch = load_diabetes(scaled=False)
    x, y = bunch.data.astype(np.float64), bunch.target.astype(np.float64)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    cols = list(bunch.feature_names)
    sex = (x[:, cols.index("sex")] > 1.5).astype(np.int64)
    cont_cols = [c for c in cols if c != "sex"]
    cont = x[:, [cols.index(c) for c in cont_cols]]
    frame = {"cont": cont, "sex": sex, "y": y, "cont_cols": cont_cols}
    split = lambda a, s: a[s] if isinstance(a, np.ndarray) else a  # noqa: E731
    train = {k: split(v, slice(n_val, None)) for k, v in frame.items()}
    val = {k: split(v, slice(None, n_val)) for k, v in frame.items()}
    return train, val


class CartPole:
    """CartPole-v1 dynamics (Euler steps of 0.02 s, reward 1 per step, done when the pole passes
    12 degrees or the cart leaves +-2.4)."""

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
