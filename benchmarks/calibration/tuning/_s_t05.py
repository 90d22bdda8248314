"""kuangliu/pytorch-cifar, main.py with models/resnet.py: a ResNet of BasicBlocks, SGD with
momentum 0.9 and weight decay 5e-4, cosine annealing stepped per epoch, cross-entropy; one
block per stage, 8 and 16 channels, on the 8x8 digits."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from _s_common import digits, fit, setup


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.layer1 = BasicBlock(8, 8, 1)
        self.layer2 = BasicBlock(8, 16, 2)
        self.linear = nn.Linear(16, 10)

    def forward(self, x):
        out = self.layer2(self.layer1(F.relu(self.bn1(self.conv1(x)))))
        return self.linear(F.adaptive_avg_pool2d(out, 1).flatten(1))


def train(run_dir: str, seed: int, *, batch: int = 128, epochs: int = 8,
          weight_decay: float = 5e-4, sched_per_batch: bool = False, lr: float = 0.1) -> None:
    g = setup(seed)
    xtr, ytr, xva, yva = digits()
    mean, std = float((xtr / 16).mean()), float((xtr / 16).std())
    data = ((xtr.view(-1, 1, 8, 8) / 16 - mean) / std, ytr,
            (xva.view(-1, 1, 8, 8) / 16 - mean) / std, yva)
    model = ResNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    fit(run_dir, model, optimizer, nn.CrossEntropyLoss(), data, g=g, epochs=epochs, batch=batch,
        config={"lr": lr, "momentum": 0.9, "weight_decay": weight_decay, "batch_size": batch,
                "epochs": epochs, "scheduler": "cosine"},
        scheduler=scheduler, sched_per_batch=sched_per_batch, val_batch=100)
