"""sthalles/SimCLR, simclr.py with models/resnet_simclr.py: a ResNet backbone whose fc becomes a
projection MLP, two augmented views per image, info_nce_loss (cosine similarities over a
temperature of 0.07, the positive first, labels all zero) into cross-entropy, Adam lr 3e-4 and
weight decay 1e-4; a 2-block ResNet of 16 channels on the 8x8 digits, views by random shifts,
pixel noise and contrast, and a kNN check of the features every epoch."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from _s_common import batches, digits, log, recorder, setup, step
from _s_t05 import BasicBlock


class ResNetSimCLR(nn.Module):
    def __init__(self, out_dim: int = 16):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.blocks = nn.Sequential(BasicBlock(16, 16, 1), BasicBlock(16, 16, 2))
        self.fc = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, out_dim))

    def features(self, x):
        return F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1).flatten(1)

    def forward(self, x):
        return self.fc(self.features(x))


def view(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    n = x.size(0)
    shifted = torch.stack([torch.roll(img, (int(a), int(b)), (1, 2))
                           for img, a, b in zip(x, torch.randint(-1, 2, (n,), generator=g),
                                                torch.randint(-1, 2, (n,), generator=g))])
    contrast = 0.6 + 0.8 * torch.rand(n, 1, 1, 1, generator=g)
    return shifted * contrast + 0.1 * torch.randn(x.shape, generator=g)


def info_nce_loss(features: torch.Tensor, n_views: int = 2, temperature: float = 0.07):
    batch = features.size(0) // n_views
    labels = torch.cat([torch.arange(batch) for _ in range(n_views)])
    labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()
    features = F.normalize(features, dim=1)
    similarity = features @ features.T
    mask = torch.eye(labels.size(0), dtype=torch.bool)
    labels = labels[~mask].view(labels.size(0), -1)
    similarity = similarity[~mask].view(similarity.size(0), -1)
    positives = similarity[labels.bool()].view(labels.size(0), -1)
    negatives = similarity[~labels.bool()].view(similarity.size(0), -1)
    logits = torch.cat([positives, negatives], dim=1) / temperature
    return logits, torch.zeros(logits.size(0), dtype=torch.long)


def knn_accuracy(model, xtr, ytr, xva, yva) -> float:
    with torch.no_grad():
        a, b = F.normalize(model.features(xtr), dim=1), F.normalize(model.features(xva), dim=1)
    return float((ytr[(b @ a.T).argmax(1)] == yva).float().mean())


def train(run_dir: str, seed: int, *, back_to_train: bool = True) -> None:
    g = setup(seed)
    xtr, ytr, xva, yva = digits()
    xtr, xva = xtr.view(-1, 1, 8, 8) / 16, xva.view(-1, 1, 8, 8) / 16
    model = ResNetSimCLR()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4, weight_decay=1e-4)
    with recorder(run_dir, model, optimizer, config={"lr": 3e-4, "batch_size": 64, "temperature": 0.07},
                  loss_fn=criterion) as rec:
        model.train()
        for _ in range(4):
            for idx in batches(len(xtr), 64, g, drop_last=True):
                images = torch.cat([view(xtr[idx], g), view(xtr[idx], g)])
                logits, labels = info_nce_loss(model(images))
                loss = criterion(logits, labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                step(rec, loss=loss, inputs=images, targets=labels, outputs=logits)
            model.eval()
            log(rec, "val", metrics={"knn_acc": knn_accuracy(model, xtr, ytr, xva, yva)})
            if back_to_train:
                model.train()
