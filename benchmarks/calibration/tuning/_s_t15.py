"""pytorch/tutorials, beginner_source/examples_nn/polynomial_nn.py: sin(x) fitted by a third-order
polynomial, nn.Sequential(Linear(3, 1), Flatten(0, 1)), MSELoss(reduction="sum"), the update by
hand under no_grad (no optimizer), model.zero_grad() each iteration; 500 of its 2000 iterations."""
from __future__ import annotations

import math

import torch
from torch import nn

from _s_common import recorder, setup, step


def train(run_dir: str, seed: int, *, zero_grad: bool = True) -> None:
    setup(seed)
    x = torch.linspace(-math.pi, math.pi, 2000)
    y = torch.sin(x)
    xx = x.unsqueeze(-1).pow(torch.tensor([1, 2, 3]))
    model = nn.Sequential(nn.Linear(3, 1), nn.Flatten(0, 1))
    loss_fn = nn.MSELoss(reduction="sum")
    learning_rate = 1e-6
    with recorder(run_dir, model, None, config={"lr": learning_rate}, loss_fn=loss_fn) as rec:
        for _ in range(500):
            y_pred = model(xx)
            loss = loss_fn(y_pred, y)
            if zero_grad:
                model.zero_grad()
            loss.backward()
            with torch.no_grad():
                for param in model.parameters():
                    param -= learning_rate * param.grad
            step(rec, loss=loss, inputs=xx, targets=y, outputs=y_pred)
