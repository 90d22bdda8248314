"""yunjey/pytorch-tutorial, 01-basics/feedforward_neural_network: Linear-ReLU-Linear, Adam,
cross-entropy; the digits as 64 pixels, 64 hidden units."""
from __future__ import annotations

import torch
from torch import nn

from _s_common import digits, fit, setup


def net(depth: int, act: type[nn.Module], bias: float | None) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Linear(64, 64), act()]
    for _ in range(depth - 1):
        layers += [nn.Linear(64, 64), act()]
    layers.append(nn.Linear(64, 10))
    if bias is not None:
        for m in layers[:-1]:
            if isinstance(m, nn.Linear):
                nn.init.constant_(m.bias, bias)
    return nn.Sequential(*layers)


def train(run_dir: str, seed: int, *, depth: int = 1, act: type[nn.Module] = nn.ReLU,
          bias: float | None = None, lr: float = 0.001) -> None:
    g = setup(seed)
    xtr, ytr, xva, yva = digits()
    model = net(depth, act, bias)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    fit(run_dir, model, optimizer, nn.CrossEntropyLoss(), (xtr / 16, ytr, xva / 16, yva), g=g,
        epochs=10, batch=100, config={"lr": lr, "batch_size": 100, "depth": depth})
