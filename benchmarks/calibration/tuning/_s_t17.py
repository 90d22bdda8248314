"""Lightning-AI/pytorch-lightning, examples/fabric/image_classifier/train_torch.py (plain torch):
two convs, dropout, log_softmax and nll_loss, Adadelta lr 1.0, StepLR gamma 0.7 per epoch; 8 and
16 channels on the 8x8 digits."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from _s_common import digits, fit, setup


class Net(nn.Module):
    def __init__(self, log_softmax: bool):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 10)
        self.log_softmax = log_softmax

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        x = self.dropout2(F.relu(self.fc1(torch.flatten(self.dropout1(x), 1))))
        x = self.fc2(x)
        return F.log_softmax(x, dim=1) if self.log_softmax else x


def train(run_dir: str, seed: int, *, log_softmax: bool = True, step_first: bool = False,
          eval_mode: bool = True) -> None:
    g = setup(seed)
    xtr, ytr, xva, yva = digits()
    data = ((xtr.view(-1, 1, 8, 8) / 16 - 0.3) / 0.4, ytr, (xva.view(-1, 1, 8, 8) / 16 - 0.3) / 0.4,
            yva)
    model = Net(log_softmax)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    fit(run_dir, model, optimizer, nn.NLLLoss(), data, g=g, epochs=5, batch=64,
        config={"lr": 1.0, "gamma": 0.7, "batch_size": 64, "epochs": 5}, scheduler=scheduler,
        step_first=step_first, eval_mode=eval_mode)
