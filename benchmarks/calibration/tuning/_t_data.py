"""Bundled data for the t-set scenarios, standing in for the scripts' downloads: scikit-learn's
8x8 digits as a small MNIST (uint8 pixels 0-255, as torchvision's MNIST holds them), its iris
table, and index batches as a shuffled DataLoader gives them."""
from __future__ import annotations

import numpy as np
import torch
from sklearn.datasets import load_digits, load_iris


def digits(seed: int, n_val: int = 360) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
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


def iris() -> tuple[np.ndarray, np.ndarray]:
    """The iris table: four measurements (cm) and the species code 0-2."""
    bunch = load_iris()
    return bunch.data.astype(np.float64), bunch.target.astype(np.int64)


def batches(n: int, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    """A shuffled epoch of index batches (DataLoader(shuffle=True), last batch kept)."""
    return list(torch.randperm(n, generator=generator).split(batch_size))
