"""pytorch/tutorials beginner_source/nn_tutorial.py ("What is torch.nn really?"), shrunk: two of
its stages.
- "scratch": the logistic regression from scratch: weights = randn(784, 10) / sqrt(784) and
  zero bias with requires_grad, the hand-written log_softmax and nll, unshuffled slices of
  bs=64, lr=0.5 and the update under torch.no_grad() (weights -= weights.grad * lr, then
  grad.zero_()). The two tensors are held as nn.Parameter of a small Module so the Recorder
  can watch them; the update is the tutorial's.
- "cnn": the final nn.Sequential CNN (Lambda(preprocess), three Conv2d(k=3, stride=2, pad=1)
  each followed by ReLU -- the last one on the 10 class maps, as published --
  AdaptiveAvgPool2d(1), flatten), F.cross_entropy, SGD(lr=0.1, momentum=0.9), the fit() loop
  with loss_batch (backward, step, then zero_grad), model.train() / model.eval(), shuffled
  train batches of 64, validation batches of 128 under no_grad and the size-weighted val loss.
Shrunk: scikit-learn's 8x8 digits flattened to 64 columns (0-1) for the MNIST pickle's 784,
1,500 train / 297 validation rows; 10 epochs (scratch) and 15 (cnn) for the tutorial's 2 over
50,000 rows. Validation loss and accuracy are recorded after each epoch (chance 0.1)."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim

import tracelab
from _e_data import batches, digits01

SOURCE = ("https://github.com/pytorch/tutorials/blob/764a8d6aed986f155098d91ea55a1f0c95b26dd8/"
          "beginner_source/nn_tutorial.py")
SIDE = 8


class Lambda(nn.Module):
    def __init__(self, func):
        super().__init__()
        self.func = func

    def forward(self, x):
        return self.func(x)


def preprocess(x):
    return x.view(-1, 1, SIDE, SIDE)


class Scratch(nn.Module):
    def __init__(self, n_in):
        super().__init__()
        self.weights = nn.Parameter(torch.randn(n_in, 10) / math.sqrt(n_in))
        self.bias = nn.Parameter(torch.zeros(10))

    def forward(self, xb):
        x = xb @ self.weights + self.bias
        return x - x.exp().sum(-1).log().unsqueeze(-1)


def nll(input, target):
    return -input[range(target.shape[0]), target].mean()


def run(run_dir: str, seed: int = 0, variant: str = "cnn", bs: int = 64) -> None:
    assert variant in ("scratch", "cnn"), variant
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_valid, y_valid = digits01(seed)
    x_train, x_valid = x_train.reshape(len(x_train), -1), x_valid.reshape(len(x_valid), -1)
    n = len(x_train)
    if variant == "scratch":
        model, lr, epochs, opt = Scratch(x_train.shape[1]), 0.5, 10, None
        loss_func = nll
    else:
        model = nn.Sequential(
            Lambda(preprocess),
            nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), Lambda(lambda x: x.view(x.size(0), -1)))
        lr, epochs = 0.1, 15
        opt = optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        loss_func = F.cross_entropy
    config = {"lr": lr, "batch_size": bs, "epochs": epochs}
    if opt is not None:
        config["momentum"] = 0.9
    with tracelab.Recorder(run_dir, model=model, optimizer=opt,
                           loss_fn=None if variant == "scratch" else nn.CrossEntropyLoss(),
                           config=config) as rec:
        for _ in range(epochs):
            model.train()
            if variant == "scratch":
                steps = [torch.arange(i * bs, min(i * bs + bs, n))
                         for i in range((n - 1) // bs + 1)]
            else:
                steps = batches(n, bs, gen)
            for idx in steps:
                xb, yb = x_train[idx], y_train[idx]
                pred = model(xb)
                loss = loss_func(pred, yb)
                loss.backward()
                if variant == "scratch":
                    with torch.no_grad():
                        model.weights -= model.weights.grad * lr
                        model.bias -= model.bias.grad * lr
                        model.weights.grad.zero_()
                        model.bias.grad.zero_()
                else:
                    opt.step()
                    opt.zero_grad()
                rec.step(loss=loss, inputs=xb, outputs=pred, targets=yb)
            model.eval()
            with torch.no_grad():
                losses, nums, correct = [], [], 0
                for idx in torch.arange(len(x_valid)).split(bs * 2):
                    out = model(x_valid[idx])
                    losses.append(loss_func(out, y_valid[idx]).item())
                    nums.append(len(idx))
                    correct += int((out.argmax(1) == y_valid[idx]).sum())
                val_loss = np.sum(np.multiply(losses, nums)) / np.sum(nums)
            rec.log("val", metrics={"loss": float(val_loss), "acc": correct / len(x_valid)},
                    inputs=x_valid, targets=y_valid)
