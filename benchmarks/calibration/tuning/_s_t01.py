"""yunjey/pytorch-tutorial, 02-intermediate/convolutional_neural_network: two conv+BN+ReLU+pool
layers and a linear head, Adam, cross-entropy; on the 8x8 digits, 8 and 16 channels."""
from __future__ import annotations

import torch
from torch import nn

from _s_common import digits, fit, setup


class ConvNet(nn.Module):
    def __init__(self, softmax_head: bool):
        super().__init__()
        self.layer1 = nn.Sequential(nn.Conv2d(1, 8, 5, padding=2), nn.BatchNorm2d(8), nn.ReLU(),
                                    nn.MaxPool2d(2))
        self.layer2 = nn.Sequential(nn.Conv2d(8, 16, 5, padding=2), nn.BatchNorm2d(16), nn.ReLU(),
                                    nn.MaxPool2d(2))
        self.fc = nn.Linear(2 * 2 * 16, 10)
        self.head = nn.Softmax(dim=1) if softmax_head else nn.Identity()

    def forward(self, x):
        return self.head(self.fc(self.layer2(self.layer1(x)).reshape(x.size(0), -1)))


def train(run_dir: str, seed: int, *, softmax_head: bool = False, eval_mode: bool = True) -> None:
    g = setup(seed)
    xtr, ytr, xva, yva = digits()
    data = xtr.view(-1, 1, 8, 8) / 16, ytr, xva.view(-1, 1, 8, 8) / 16, yva
    model = ConvNet(softmax_head)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    fit(run_dir, model, optimizer, nn.CrossEntropyLoss(), data, g=g, epochs=5, batch=64,
        config={"lr": 0.001, "batch_size": 64, "epochs": 5}, eval_mode=eval_mode, val_batch=4)
