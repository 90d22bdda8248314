"""Bundled data standing in for the downloads of the u-scripts: scikit-learn's 8x8 digits as a
small MNIST (uint8 pixels 0-255), and a fixed random "teacher" network for regression targets."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081  # Normalize((0.1307,), (0.3081,)) of the MNIST scripts


def digits(seed: int, n_val: int = 300, size: int = 8):
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


def normalize(images: torch.Tensor) -> torch.Tensor:
    """ToTensor() then Normalize((0.1307,), (0.3081,))."""
    return (to_tensor(images) - MNIST_MEAN) / MNIST_STD


def batches(n: int, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    """A shuffled epoch of index batches (DataLoader(shuffle=True), last batch kept)."""
    return list(torch.randperm(n, generator=generator).split(batch_size))


def teacher_regression(seed: int, n: int, d_in: int, d_out: int, hidden: int = 32,
                       noise: float = 0.1):
    """x ~ N(0, 1) of shape (n, d_in) and y = a fixed random two-layer tanh net of x plus noise,
    scaled to unit variance per output column."""
    g = torch.Generator().manual_seed(1000 + seed)
    x = torch.randn(n, d_in, generator=g)
    w1 = torch.randn(d_in, hidden, generator=g) / d_in ** 0.5
    w2 = torch.randn(hidden, d_out, generator=g) / hidden ** 0.5
    y = torch.tanh(x @ w1 * 2.0) @ w2
    y = (y - y.mean(0)) / y.std(0)
    y = y + noise * torch.randn(y.shape, generator=g)
    return x, y
