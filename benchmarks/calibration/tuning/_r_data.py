"""Bundled data standing in for the downloads of the r-scripts: scikit-learn's 8x8 digits as
small uint8 images (0-255), optionally upsampled, split by seed."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits


def digits(seed: int, n_val: int = 300, size: int = 8, channels: int = 1):
    """(train images, train labels, val images, val labels): uint8 (N, channels, size, size)
    in 0-255 (bilinearly upsampled from 8x8 when size > 8), int64 labels."""
    bunch = load_digits()
    images = torch.from_numpy(bunch.images * (255.0 / 16.0)).float()[:, None]
    if size != 8:
        images = F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
    images = images.round().clamp(0, 255).to(torch.uint8)
    if channels != 1:
        images = images.repeat(1, channels, 1, 1)
    order = torch.from_numpy(np.random.default_rng(seed).permutation(len(images)))
    images, labels = images[order], torch.from_numpy(bunch.target)[order]
    return images[n_val:], labels[n_val:], images[:n_val], labels[:n_val]


def to_tensor(images: torch.Tensor) -> torch.Tensor:
    """torchvision's ToTensor(): uint8 0-255 to float 0-1."""
    return images.float() / 255.0


def batches(n: int, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    """A shuffled epoch of index batches (DataLoader(shuffle=True), last batch kept)."""
    return list(torch.randperm(n, generator=generator).split(batch_size))
