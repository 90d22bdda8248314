"""yunjey/pytorch-tutorial, 01-basics/logistic_regression: one linear layer, SGD, cross-entropy;
the digits as 64 pixels (lr 0.05 for the few steps the shrunk run takes)."""
from __future__ import annotations

import torch
from torch import nn

from _s_common import digits, fit, setup


def train(run_dir: str, seed: int, *, zero_grad: bool = True, scale: bool = True) -> None:
    g = setup(seed)
    xtr, ytr, xva, yva = digits()
    # the pixels as a loader of uint8 images gives them
    xtr, xva = (xtr * 255 / 16).round(), (xva * 255 / 16).round()
    if scale:
        xtr, xva = xtr / 255, xva / 255
    model = nn.Linear(64, 10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    fit(run_dir, model, optimizer, nn.CrossEntropyLoss(), (xtr, ytr, xva, yva), g=g, epochs=15,
        batch=100, config={"lr": 0.05, "batch_size": 100, "epochs": 15}, zero_grad=zero_grad)
