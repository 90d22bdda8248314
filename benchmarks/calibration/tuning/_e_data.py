"""Bundled data standing in for the downloads of the e-prefix scripts: scikit-learn's 8x8 digits
as a small MNIST (pixels scaled to 0-1 as transforms.ToTensor() gives them)."""
from __future__ import annotations

import numpy as np
import torch
from sklearn.datasets import load_digits


def digits01(seed: int, n_val: int = 297) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                   torch.Tensor]:
    """(train images, train labels, val images, val labels): float images (N, 1, 8, 8) in 0-1
    and int64 labels, split at random by `seed`."""
    bunch = load_digits()
    images = (np.round(bunch.images * (255.0 / 16.0)) / 255.0).astype(np.float32)[:, None]
    order = np.random.default_rng(seed).permutation(len(images))
    images, labels = torch.from_numpy(images[order]), torch.from_numpy(bunch.target[order])
    return images[n_val:], labels[n_val:], images[:n_val], labels[:n_val]


def batches(n: int, batch_size: int, generator: torch.Generator | None,
            shuffle: bool = True, drop_last: bool = False) -> list[torch.Tensor]:
    """An epoch of index batches (DataLoader(shuffle=..., drop_last=...))."""
    order = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)
    out = list(order.split(batch_size))
    if drop_last and len(out[-1]) < batch_size:
        out = out[:-1]
    return out
