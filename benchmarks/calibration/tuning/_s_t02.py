"""yunjey/pytorch-tutorial, 02-intermediate/recurrent_neural_network: a 2-layer LSTM over the
image's rows and a linear head on the last step, Adam, cross-entropy; the digits' 8 rows."""
from __future__ import annotations

import torch
from torch import nn

from _s_common import digits, fit, setup


class RNN(nn.Module):
    def __init__(self, batch_first: bool):
        super().__init__()
        self.lstm = nn.LSTM(8, 32, 2, batch_first=batch_first)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(out[:, -1, :])


def train(run_dir: str, seed: int, *, batch_first: bool = True) -> None:
    g = setup(seed)
    xtr, ytr, xva, yva = digits()
    data = xtr.view(-1, 8, 8) / 16, ytr, xva.view(-1, 8, 8) / 16, yva
    model = RNN(batch_first)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    fit(run_dir, model, optimizer, nn.CrossEntropyLoss(), data, g=g, epochs=6, batch=100,
        config={"lr": 0.01, "batch_size": 100, "epochs": 6})
