"""Bjarten/early-stopping-pytorch MNIST_Early_Stopping_example.ipynb, shrunk: its Net (fc 128,
dropout 0.5, fc 128, dropout 0.5, fc 10), nn.CrossEntropyLoss, Adam with its default lr, batch
256, the training set split 80/20 into train and validation by SubsetRandomSampler, and the
EarlyStopping(patience=20) object of the package (the best model's state kept when the
validation loss improves, training stopped after `patience` epochs without). train_model()
calls model.train() at the top of every epoch and model.eval() before the validation pass. The
data is scikit-learn's 8x8 digits (uint8, 0-255) through ToTensor(), so fc1 takes 64 inputs
instead of 784, and 100 epochs become 60.

`bug` plants one fault (None: the script as published):
- "train-once": model.train() called once before the epoch loop, so from the second epoch on
  every training step runs in eval mode (dropout off) after the validation pass;
- "no-eval": the validation pass without model.eval() (dropout active);
- "raw-pixels": the transform leaves out ToTensor()'s scaling: pixels go in as 0-255 floats;
- "val-from-train": the validation sampler drawn from the training indices (valid_idx =
  train_idx[:split]), so every validation digit is also trained on;
- "val-raw": the validation loader's transform left without ToTensor()'s scaling (0-255
  pixels) while training batches are scaled to 0-1.
"""
from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab
from _t_data import batches, digits, to_tensor

SOURCE = ("https://github.com/Bjarten/early-stopping-pytorch/blob/"
          "fbd87a6135820700e27cda3448d5d54dc6fd3b0c/MNIST_Early_Stopping_example.ipynb")
BUGS = (None, "train-once", "no-eval", "raw-pixels", "val-from-train", "val-raw")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8 * 8, 128)
        self.fc2 = nn.Linear(128, 128)
        self.fc3 = nn.Linear(128, 10)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x):
        x = x.view(-1, 8 * 8)
        x = F.relu(self.fc1(x))
        x = self.dropout(x)
        x = F.relu(self.fc2(x))
        x = self.dropout(x)
        return self.fc3(x)


class EarlyStopping:
    """The package's EarlyStopping: keeps the best state, stops after `patience` bad epochs."""

    def __init__(self, patience=20, delta=0.0):
        self.patience, self.delta = patience, delta
        self.counter, self.best, self.early_stop, self.state = 0, None, False, None

    def __call__(self, val_loss, model):
        if self.best is None or val_loss < self.best - self.delta:
            self.best, self.counter = val_loss, 0
            self.state = copy.deepcopy(model.state_dict())
        else:
            self.counter += 1
            if self.counter >= self.patience:
                self.early_stop = True


def run(run_dir: str, seed: int = 0, bug: str | None = None, n_epochs: int = 60,
        batch_size: int = 256, patience: int = 20) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    images, labels, _, _ = digits(seed, n_val=0)
    split = int(np.floor(0.2 * len(images)))  # valid_size = 0.2 of the training set
    transform = (lambda im: im.float()) if bug == "raw-pixels" else to_tensor
    x_valid, y_valid = transform(images[:split]), labels[:split]
    x_train, y_train = transform(images[split:]), labels[split:]
    if bug == "val-raw":
        x_valid = images[:split].float()
    if bug == "val-from-train":
        x_valid, y_valid = x_train[:split], y_train[:split]
    model = Net()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters())
    early_stopping = EarlyStopping(patience=patience)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": 1e-3, "batch_size": batch_size,
                                   "patience": patience, "n_epochs": n_epochs}) as rec:
        if bug == "train-once":
            model.train()
        for _epoch in range(1, n_epochs + 1):
            if bug != "train-once":
                model.train()  # prep model for training
            for idx in batches(len(x_train), batch_size, gen):
                data, target = x_train[idx], y_train[idx]
                optimizer.zero_grad()
                output = model(data)
                loss = criterion(output, target)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=data, targets=target, outputs=output)
            if bug != "no-eval":
                model.eval()  # prep model for evaluation
            valid_losses, correct = [], 0
            with torch.no_grad():
                for idx in torch.arange(len(x_valid)).split(batch_size):
                    output = model(x_valid[idx])
                    valid_losses.append(criterion(output, y_valid[idx]).item())
                    correct += (output.argmax(1) == y_valid[idx]).sum().item()
            valid_loss = float(np.average(valid_losses))
            rec.log("val", metrics={"loss": valid_loss, "acc": correct / len(x_valid)},
                    inputs=x_valid[:batch_size], targets=y_valid[:batch_size],
                    outputs=model(x_valid[:batch_size]).detach())
            early_stopping(valid_loss, model)
            if early_stopping.early_stop:
                break
    model.load_state_dict(early_stopping.state)
