"""bentrevett/pytorch-sentiment-analysis, legacy notebook 3 (Faster Sentiment Analysis, FastText):
the mean of the word embeddings into one linear output, Adam, BCEWithLogitsLoss, accuracy as
round(sigmoid(prediction)). Reviews of 20 words from a vocabulary of 60 where 10 words lean
positive and 10 negative; embeddings 16."""
from __future__ import annotations

import torch
from torch import nn

from _s_common import fit, setup


class FastText(nn.Module):
    def __init__(self, sigmoid: bool):
        super().__init__()
        self.embedding = nn.Embedding(60, 16, padding_idx=0)
        self.fc = nn.Linear(16, 1)
        self.sigmoid = sigmoid

    def forward(self, text):
        out = self.fc(self.embedding(text).mean(dim=1)).squeeze(1)
        return torch.sigmoid(out) if self.sigmoid else out


def reviews(n: int, g: torch.Generator):
    words = torch.randint(21, 60, (n, 20), generator=g)
    label = (torch.rand(n, generator=g) < 0.5).float()
    cue = torch.where(label[:, None] > 0, torch.randint(1, 11, (n, 4), generator=g),
                      torch.randint(11, 21, (n, 4), generator=g))
    words[:, :4] = cue
    return words[:, torch.randperm(20, generator=g)], label


def binary_accuracy(preds: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    return {"acc": float((torch.round(torch.sigmoid(preds)) == y).float().mean())}


def train(run_dir: str, seed: int, *, sigmoid: bool = False) -> None:
    g = setup(seed)
    data = (*reviews(2000, g), *reviews(400, g))
    model = FastText(sigmoid)
    optimizer = torch.optim.Adam(model.parameters())
    fit(run_dir, model, optimizer, nn.BCEWithLogitsLoss(), data, g=g, epochs=10, batch=64,
        config={"batch_size": 64}, metrics=binary_accuracy)
