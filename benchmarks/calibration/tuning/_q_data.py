"""Bundled data standing in for the downloads of the q-scripts: scikit-learn's 8x8 digits as a
small MNIST/Fashion-MNIST (uint8 pixels 0-255, resized when a model wants larger images),
scikit-learn's diabetes table in its raw units, a synthetic corpus for language models, and
shuffled index batches."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_diabetes, load_digits


def digits(seed: int, n_val: int = 300, size: int = 8, channels: int = 1):
    """(train images, train labels, val images, val labels): uint8 images
    (N, channels, size, size) in 0-255 (bilinearly resized from 8x8 when size != 8), int64
    labels, split at random by `seed`."""
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


def diabetes_raw():
    """scikit-learn's diabetes table unscaled: (features float64 (442, 10) in their own units
    -- age in years, sex coded 1/2, BMI, blood pressure, six serum measurements --, target
    float64 (442,), a disease progression score 25-346)."""
    bunch = load_diabetes(scaled=False)
    return bunch.data.astype(np.float64), bunch.target.astype(np.float64)


def batches(n: int, batch_size: int, generator: torch.Generator, drop_last: bool = False):
    """A shuffled epoch of index batches (DataLoader(shuffle=True))."""
    parts = list(torch.randperm(n, generator=generator).split(batch_size))
    if drop_last and len(parts[-1]) < batch_size:
        parts = parts[:-1]
    return parts


def corpus(seed: int, n_tokens: int, vocab: int = 40, order_seed: int = 7) -> torch.Tensor:
    """A token stream from a fixed sparse Markov chain over `vocab` words (each word allows
    three next words), so a language model can learn it well below the uniform log(vocab).
    The chain is fixed by `order_seed`; the sampled stream by `seed`."""
    g = np.random.default_rng(order_seed)
    nxt = g.integers(0, vocab, size=(vocab, 3))
    prob = g.dirichlet(np.ones(3) * 0.7, size=vocab)
    r = np.random.default_rng(seed)
    out = np.empty(n_tokens, dtype=np.int64)
    out[0] = r.integers(0, vocab)
    for i in range(1, n_tokens):
        a = out[i - 1]
        out[i] = nxt[a, r.choice(3, p=prob[a])]
    return torch.from_numpy(out)
