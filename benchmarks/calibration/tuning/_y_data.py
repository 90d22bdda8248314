"""Bundled data standing in for the downloads of the y-scripts: scikit-learn's 8x8 digits as a
small MNIST/CIFAR (uint8 pixels 0-255), and shuffled index batches."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits


def digits(seed: int, n_val: int = 300, size: int = 8, channels: int = 1):
    """(train images, train labels, val images, val labels): uint8 images
    (N, channels, size, size) in 0-255 (bilinearly resized from 8x8 when size != 8, the gray
    channel repeated when channels > 1), int64 labels, split at random by `seed`."""
    bunch = load_digits()
    images = torch.from_numpy(bunch.images * (255.0 / 16.0)).float()[:, None]
    if size != 8:
        images = F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
    images = images.round().clamp(0, 255).to(torch.uint8).repeat(1, channels, 1, 1)
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
