"""adambielski/siamese-triplet (networks.py EmbeddingNet and SiameseNet, losses.py
ContrastiveLoss, trainer.py fit/train_epoch/test_epoch, the Siamese network of
Experiments_MNIST.ipynb), shrunk: the EmbeddingNet (two conv-5 layers with PReLU and max-pool,
fc 256, 256, a 2-d embedding) shared by both branches, ContrastiveLoss(margin=1.) (mean),
Adam(lr=1e-3), StepLR(step_size=8, gamma=0.1) stepped at the start of each epoch as fit() does,
model.train() / model.eval() around the epochs. The notebook's SiameseMNIST pairs (each image
with a random image of the same class or of another class, half and half) are built from
scikit-learn's 8x8 digits upsampled to 16x16 (normalized as the notebook's MNIST), so the first
fc takes 64 features instead of 64 * 4 * 4; batch 128, 12 epochs instead of 20.

`bug` plants one fault (None: the code as published):
- "sched-per-batch": scheduler.step() called in the batch loop instead of once per epoch.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import lr_scheduler

import tracelab
from _u_data import digits, normalize

SOURCE = ("https://github.com/adambielski/siamese-triplet/blob/"
          "4ed17efa6b2850c5cbef0b3986eae7c94eb1d6a1/trainer.py")
BUGS = (None, "sched-per-batch")


class EmbeddingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.convnet = nn.Sequential(nn.Conv2d(1, 32, 5), nn.PReLU(),
                                     nn.MaxPool2d(2, stride=2),
                                     nn.Conv2d(32, 64, 5), nn.PReLU(),
                                     nn.MaxPool2d(2, stride=2))
        self.fc = nn.Sequential(nn.Linear(64 * 1 * 1, 256), nn.PReLU(),
                                nn.Linear(256, 256), nn.PReLU(),
                                nn.Linear(256, 2))

    def forward(self, x):
        output = self.convnet(x)
        output = output.view(output.size()[0], -1)
        return self.fc(output)


class SiameseNet(nn.Module):
    def __init__(self, embedding_net):
        super().__init__()
        self.embedding_net = embedding_net

    def forward(self, x1, x2):
        return self.embedding_net(x1), self.embedding_net(x2)


class ContrastiveLoss(nn.Module):
    def __init__(self, margin):
        super().__init__()
        self.margin = margin

    def forward(self, output1, output2, target, size_average=True):
        distances = (output2 - output1).pow(2).sum(1)
        losses = 0.5 * (target.float() * distances +
                        (1 + -1 * target).float() * F.relu(self.margin - distances.sqrt()).pow(2))
        return losses.mean() if size_average else losses.sum()


def _pairs(images, labels, rng):
    """SiameseMNIST: each image with a same-class (target 1) or other-class (target 0) image."""
    labels_np = labels.numpy()
    by_class = {c: np.where(labels_np == c)[0] for c in range(10)}
    target = rng.integers(0, 2, len(labels_np))
    partner = np.empty(len(labels_np), dtype=np.int64)
    for i, (c, t) in enumerate(zip(labels_np, target)):
        if t == 1:  # datasets.py draws again until the partner is another image
            partner[i] = i
            while partner[i] == i:
                partner[i] = rng.choice(by_class[c])
        else:
            other = rng.choice([k for k in range(10) if k != c])
            partner[i] = rng.choice(by_class[other])
    return images, images[torch.from_numpy(partner)], torch.from_numpy(target)


def _pair_accuracy(out1, out2, target):
    """Same-class call when the embedding distance is under half the margin."""
    d = (out1 - out2).pow(2).sum(1).sqrt()
    return ((d < 0.5).long() == target).float().mean().item()


def run(run_dir: str, seed: int = 0, bug: str | None = None, n_epochs: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    x_train, y_train, x_val, y_val = digits(seed, size=16)
    x_train, x_val = normalize(x_train), normalize(x_val)
    val1, val2, val_t = _pairs(x_val, y_val, np.random.default_rng(seed + 1))
    model = SiameseNet(EmbeddingNet())
    loss_fn = ContrastiveLoss(1.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = lr_scheduler.StepLR(optimizer, 8, gamma=0.1, last_epoch=-1)
    batch_size = 128
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, scheduler=scheduler,
                           loss_fn=loss_fn, config={"lr": 1e-3, "margin": 1.0,
                                                    "batch_size": batch_size,
                                                    "step_size": 8, "gamma": 0.1}) as rec:
        for epoch in range(n_epochs):
            if bug != "sched-per-batch":  # fit() steps it at the start of each epoch
                scheduler.step()
            x1, x2, target = _pairs(x_train, y_train, rng)
            model.train()
            order = torch.from_numpy(rng.permutation(len(target)))
            for idx in order.split(batch_size):
                optimizer.zero_grad()
                out1, out2 = model(x1[idx], x2[idx])
                loss = loss_fn(out1, out2, target[idx])
                loss.backward()
                optimizer.step()
                if bug == "sched-per-batch":
                    scheduler.step()
                rec.step(loss=loss, inputs=(x1[idx], x2[idx]), targets=target[idx],
                         outputs=out1)
            model.eval()
            with torch.no_grad():
                out1, out2 = model(val1, val2)
                val_loss = loss_fn(out1, out2, val_t).item()
            rec.log("val", metrics={"loss": val_loss,
                                    "pair_acc": _pair_accuracy(out1, out2, val_t)},
                    inputs=(val1, val2), targets=val_t, outputs=out1)
