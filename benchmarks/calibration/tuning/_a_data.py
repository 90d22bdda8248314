"""Bundled data standing in for the downloads of the scripts of the a-half: scikit-learn's 8x8
digits as a small MNIST (uint8 pixels 0-255, as torchvision's MNIST holds them)."""
from __future__ import annotations

import numpy as np
import torch
from sklearn.datasets import load_digits

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081  # the Normalize() of pytorch/examples' MNIST scripts


def digits(seed: int, n_val: int = 300) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                   torch.Tensor]:
    """(train images, train labels, val images, val labels): uint8 images (N, 1, 8, 8) in
    0-255 and int64 labels, split at random by `seed`."""
    bunch = load_digits()
    images = np.round(bunch.images * (255.0 / 16.0)).astype(np.uint8)[:, None]
    order = np.random.default_rng(seed).permutation(len(images))
    images, labels = torch.from_numpy(images[order]), torch.from_numpy(bunch.target[order])
    return images[n_val:], labels[n_val:], images[:n_val], labels[:n_val]


def to_tensor(images: torch.Tensor) -> torch.Tensor:
    """torchvision's ToTensor(): uint8 0-255 to float 0-1."""
    return images.float() / 255.0


def normalize(images: torch.Tensor) -> torch.Tensor:
    """ToTensor() then Normalize((0.1307,), (0.3081,)), as the MNIST scripts transform."""
    return (to_tensor(images) - MNIST_MEAN) / MNIST_STD


def batches(n: int, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    """A shuffled epoch of index batches (DataLoader(shuffle=True), last batch kept)."""
    return list(torch.randperm(n, generator=generator).split(batch_size))
