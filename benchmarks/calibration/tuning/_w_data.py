"""Bundled data standing in for the downloads of the w-scripts: scikit-learn's 8x8 digits as a
small MNIST (0-255 pixels, upsampled to 28x28 where a script's layers need it), a synthetic
two-class "sentiment" corpus of token ids, a small generated English text for character models,
Iris for tabular work, and CartPole dynamics for the actor-critic."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits


def digits(seed: int, n_val: int = 300, size: int = 28):
    """(train images, train labels, val images, val labels): float images (N, 1, size, size)
    in 0-255 (bilinearly upsampled from 8x8), int64 labels, split by `seed`."""
    bunch = load_digits()
    images = torch.from_numpy(bunch.images * (255.0 / 16.0)).float()[:, None]
    if size != 8:
        images = F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
    images = images.round().clamp(0, 255)
    order = torch.from_numpy(np.random.default_rng(seed).permutation(len(images)))
    images, labels = images[order], torch.from_numpy(bunch.target)[order].long()
    return images[n_val:], labels[n_val:], images[:n_val], labels[:n_val]


def to_tensor(images: torch.Tensor) -> torch.Tensor:
    """torchvision's ToTensor(): 0-255 to float 0-1."""
    return images / 255.0


def batches(n: int, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    """A shuffled epoch of index batches (DataLoader(shuffle=True), last batch kept)."""
    return list(torch.randperm(n, generator=generator).split(batch_size))


def sentiment(seed: int, n_train: int = 1200, n_val: int = 300, length: int = 40,
              vocab: int = 500):
    """Token-id "reviews" (N, length) over `vocab` words, ids 0 and 1 reserved (pad, unk); a
    review is positive when it holds more of the 20 "positive" words (ids 2-21) than of the 20
    "negative" ones (ids 22-41). Labels are 0/1."""
    g = torch.Generator().manual_seed(2000 + seed)
    n = n_train + n_val
    x = torch.randint(42, vocab, (n, length), generator=g)
    y = torch.randint(0, 2, (n,), generator=g)
    k = torch.randint(2, 7, (n,), generator=g)
    for i in range(n):
        lo = 2 if y[i] == 1 else 22
        pos = torch.randperm(length, generator=g)[: int(k[i])]
        x[i, pos] = torch.randint(lo, lo + 20, (int(k[i]),), generator=g)
        other = torch.randperm(length, generator=g)[: max(0, int(k[i]) - 2)]
        other = other[~torch.isin(other, pos)]
        x[i, other] = torch.randint(22 if lo == 2 else 2, (42 if lo == 2 else 22), (len(other),),
                                    generator=g)
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


_WORDS = ("the king and the queen walked to the castle while the old man sang a song of "
          "the sea and the wind . she said that the night was long and the day was short . "
          "he asked where the river went and they told him it went to the sea . ").split()


def text(seed: int, n_words: int = 4000) -> str:
    """A generated English-like text: sentences of the words above in a first-order Markov
    chain learnt from the seed sentence, so characters follow each other predictably."""
    rng = np.random.default_rng(3000 + seed)
    follow: dict[str, list[str]] = {}
    for a, b in zip(_WORDS, _WORDS[1:] + _WORDS[:1]):
        follow.setdefault(a, []).append(b)
    w, out = "the", []
    for _ in range(n_words):
        out.append(w)
        w = follow[w][rng.integers(len(follow[w]))]
    return " ".join(out)


class CartPole:
    """gym's CartPole dynamics (Euler steps of 0.02 s, reward 1 per step); `max_steps` caps an
    episode as the shrunk runs need."""

    def __init__(self, rng: np.random.Generator, max_steps: int = 200):
        self.rng, self.max_steps = rng, max_steps

    def reset(self) -> np.ndarray:
        self.state, self.t = self.rng.uniform(-0.05, 0.05, 4), 0
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
        self.t += 1
        done = (abs(self.state[0]) > 2.4 or abs(self.state[2]) > 12 * 2 * math.pi / 360
                or self.t >= self.max_steps)
        return self.state.astype(np.float32), 1.0, done, {}
