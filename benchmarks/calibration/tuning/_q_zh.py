"""ShusenTang/Dive-into-DL-PyTorch (the PyTorch port of the Chinese d2l book), four notebooks and
their d2lzh_pytorch/utils.py helpers, shrunk. Fashion-MNIST is replaced by scikit-learn's 8x8
digits (ToTensor() scaling; resized to 28x28 for LeNet), the Kaggle house prices by
scikit-learn's raw diabetes table, the airfoil table by the same table standardized.

- `run_mlp`, 3.10 mlp-pytorch: FlattenLayer + Linear(64, 256) + ReLU + Linear(256, 10), every
  parameter init.normal_(std=0.01), CrossEntropyLoss, SGD(lr=0.5), train_ch3's loop
  (zero_grad, backward, step per batch; evaluate_accuracy after each epoch); batches of 64
  instead of 256 and 8 epochs instead of 5 (a smaller training set).
- `run_dropout`, 3.13 dropout (the concise version): FlattenLayer + Linear(64, 256) + ReLU +
  Dropout(0.2) + Linear(256, 256) + ReLU + Dropout(0.5) + Linear(256, 10), init.normal_(std=0.01),
  CrossEntropyLoss, SGD(lr=0.5), train_ch3 with evaluate_accuracy (net.eval() for the test set,
  net.train() back); batches of 64 instead of 256 and 15 epochs instead of 5 (a smaller
  training set).
- `run_house`, 3.16 kaggle-house-price: numeric features standardized over train and test rows
  ((x - mean) / std, NaN -> 0), get_net's Linear(d, 1) with normal(0, 0.01) init, MSELoss,
  Adam(lr=5, weight_decay=0), batch 64, log_rmse on the held-out fold each epoch; one fold of
  the 5-fold split (fold 0 held out) and 60 epochs instead of 5 x 100.
- `run_lenet_bn`, 5.10 batch-norm (the concise version): LeNet with BatchNorm2d/BatchNorm1d
  after each conv and hidden linear layer, sigmoid activations, Adam(lr=0.001), train_ch5's
  loop, evaluate_accuracy switching net.eval() for the test set and net.train() back; batch 64
  instead of 256 (a smaller training set), 5 epochs.
- `run_rmsprop`, 7.6 rmsprop with train_pytorch_ch7: nn.Sequential(Linear(d, 1)), MSELoss / 2
  on net(X).view(-1), RMSprop(lr=0.01, alpha=0.9), batch 10, the standardized table's first
  rows (all 442 instead of 1500) and 4 epochs instead of 2.

`bug` plants one fault (None: the notebook as published):
- run_mlp "zero-grad-per-epoch": optimizer.zero_grad() called once per epoch, before the batch
  loop, instead of before every backward;
- run_mlp "shuffle-apart": the training images and their labels shuffled once before training,
  each by its own permutation, so the labels no longer belong to their images;
- run_house "raw-features": the numeric features left in their raw units (no standardization);
- run_house "val-raw": the features standardized for the training rows only (their own mean and
  std), the held-out fold fed in raw units;
- run_lenet_bn "no-train-back": evaluate_accuracy switches net.eval() and never net.train()
  back, so every epoch after the first trains in eval mode;
- run_rmsprop "no-view": the prediction's .view(-1) left out, an (N, 1) column against (N,)
  targets in MSELoss.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import init

import tracelab
from _q_data import batches, diabetes_raw, digits, to_tensor

COMMIT = "09c8bacc08599eb86236551454ba43b82cb91498"
BASE = f"https://github.com/ShusenTang/Dive-into-DL-PyTorch/blob/{COMMIT}/code/"
SOURCE_MLP = BASE + "chapter03_DL-basics/3.10_mlp-pytorch.ipynb"
SOURCE_DROPOUT = BASE + "chapter03_DL-basics/3.13_dropout.ipynb"
SOURCE_HOUSE = BASE + "chapter03_DL-basics/3.16_kaggle-house-price.ipynb"
SOURCE_BN = BASE + "chapter05_CNN/5.10_batch-norm.ipynb"
SOURCE_RMSPROP = BASE + "chapter07_optimization/7.6_rmsprop.ipynb"


class FlattenLayer(nn.Module):
    def forward(self, x):
        return x.view(x.shape[0], -1)


def evaluate_accuracy(images, labels, net, switch_back=True):
    acc_sum, n = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(images), 256):
            x, y = images[start:start + 256], labels[start:start + 256]
            net.eval()
            acc_sum += (net(x).argmax(dim=1) == y).float().sum().item()
            if switch_back:
                net.train()
            n += y.shape[0]
    return acc_sum / n


def run_mlp(run_dir: str, seed: int = 0, bug: str | None = None, num_epochs: int = 8) -> None:
    assert bug in (None, "zero-grad-per-epoch", "shuffle-apart"), bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_test, y_test = digits(seed)
    if bug == "shuffle-apart":
        x_train = x_train[torch.randperm(len(x_train), generator=gen)]
        y_train = y_train[torch.randperm(len(y_train), generator=gen)]
    x_train, x_test = to_tensor(x_train), to_tensor(x_test)
    num_inputs, num_outputs, num_hiddens = 64, 10, 256
    net = nn.Sequential(FlattenLayer(), nn.Linear(num_inputs, num_hiddens), nn.ReLU(),
                        nn.Linear(num_hiddens, num_outputs))
    for params in net.parameters():
        init.normal_(params, mean=0, std=0.01)
    batch_size = 64
    loss = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.5)
    with tracelab.Recorder(run_dir, model=net, optimizer=optimizer, loss_fn=loss,
                           config={"lr": 0.5, "batch_size": batch_size,
                                   "num_epochs": num_epochs}) as rec:
        for _ in range(num_epochs):
            if bug == "zero-grad-per-epoch":
                optimizer.zero_grad()
            for idx in batches(len(x_train), batch_size, gen):
                X, y = x_train[idx], y_train[idx]
                y_hat = net(X)
                l = loss(y_hat, y).sum()
                if bug != "zero-grad-per-epoch":
                    optimizer.zero_grad()
                l.backward()
                optimizer.step()
                rec.step(loss=l, inputs=X, targets=y, outputs=y_hat)
            with torch.no_grad():
                out = net(x_test)
            rec.log("val", metrics={"acc": evaluate_accuracy(x_test, y_test, net),
                                    "loss": loss(out, y_test).item()},
                    inputs=x_test, targets=y_test, outputs=out)


def run_dropout(run_dir: str, seed: int = 0, bug: str | None = None,
                num_epochs: int = 15) -> None:
    assert bug is None, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_test, y_test = digits(seed)
    x_train, x_test = to_tensor(x_train), to_tensor(x_test)
    num_inputs, num_outputs, num_hiddens1, num_hiddens2 = 64, 10, 256, 256
    drop_prob1, drop_prob2 = 0.2, 0.5
    net = nn.Sequential(FlattenLayer(), nn.Linear(num_inputs, num_hiddens1), nn.ReLU(),
                        nn.Dropout(drop_prob1), nn.Linear(num_hiddens1, num_hiddens2), nn.ReLU(),
                        nn.Dropout(drop_prob2), nn.Linear(num_hiddens2, num_outputs))
    for param in net.parameters():
        nn.init.normal_(param, mean=0, std=0.01)
    batch_size = 64
    loss = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.5)
    with tracelab.Recorder(run_dir, model=net, optimizer=optimizer, loss_fn=loss,
                           config={"lr": 0.5, "batch_size": batch_size, "drop_prob1": drop_prob1,
                                   "drop_prob2": drop_prob2, "num_epochs": num_epochs}) as rec:
        for _ in range(num_epochs):
            for idx in batches(len(x_train), batch_size, gen):
                X, y = x_train[idx], y_train[idx]
                y_hat = net(X)
                l = loss(y_hat, y).sum()
                optimizer.zero_grad()
                l.backward()
                optimizer.step()
                rec.step(loss=l, inputs=X, targets=y, outputs=y_hat)
            acc = evaluate_accuracy(x_test, y_test, net)
            net.eval()
            with torch.no_grad():
                out = net(x_test)
            net.train()
            rec.log("val", metrics={"acc": acc, "loss": loss(out, y_test).item()},
                    inputs=x_test, targets=y_test, outputs=out)


def run_house(run_dir: str, seed: int = 0, bug: str | None = None, num_epochs: int = 60) -> None:
    assert bug in (None, "raw-features", "val-raw"), bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    np.random.seed(seed)
    gen = torch.Generator().manual_seed(seed)
    features, target = diabetes_raw()
    order = np.random.default_rng(seed).permutation(len(target))
    if bug == "val-raw":
        rows = order[len(target) // 5:]
        mean, std = features[rows].mean(axis=0), features[rows].std(axis=0, ddof=1)
        features = features.copy()
        features[rows] = (features[rows] - mean) / std
    elif bug != "raw-features":
        features = (features - features.mean(axis=0)) / features.std(axis=0, ddof=1)
    features = np.nan_to_num(features)
    X = torch.tensor(features[order], dtype=torch.float)
    y = torch.tensor(target[order], dtype=torch.float).view(-1, 1)
    k, fold = 5, len(y) // 5
    X_valid, y_valid = X[:fold], y[:fold]
    X_train, y_train = X[fold:k * fold], y[fold:k * fold]
    loss = torch.nn.MSELoss()
    net = nn.Linear(X.shape[1], 1)
    for param in net.parameters():
        nn.init.normal_(param, mean=0, std=0.01)
    lr, weight_decay, batch_size = 5, 0, 64

    def log_rmse(features, labels):
        with torch.no_grad():
            clipped_preds = torch.max(net(features), torch.tensor(1.0))
            return torch.sqrt(loss(clipped_preds.log(), labels.log())).item()

    optimizer = torch.optim.Adam(params=net.parameters(), lr=lr, weight_decay=weight_decay)
    with tracelab.Recorder(run_dir, model=net, optimizer=optimizer, loss_fn=loss,
                           config={"lr": lr, "weight_decay": weight_decay,
                                   "batch_size": batch_size, "num_epochs": num_epochs}) as rec:
        for _ in range(num_epochs):
            for idx in batches(len(y_train), batch_size, gen):
                Xb, yb = X_train[idx], y_train[idx]
                out = net(Xb.float())
                l = loss(out, yb.float())
                optimizer.zero_grad()
                l.backward()
                optimizer.step()
                rec.step(loss=l, inputs=Xb, targets=yb, outputs=out)
            with torch.no_grad():
                out = net(X_valid)
            rec.log("val", metrics={"log_rmse": log_rmse(X_valid, y_valid),
                                    "loss": loss(out, y_valid).item()},
                    inputs=X_valid, targets=y_valid, outputs=out)


def run_lenet_bn(run_dir: str, seed: int = 0, bug: str | None = None, num_epochs: int = 5) -> None:
    assert bug in (None, "no-train-back"), bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_test, y_test = digits(seed, size=28)
    x_train, x_test = to_tensor(x_train), to_tensor(x_test)
    net = nn.Sequential(
        nn.Conv2d(1, 6, 5), nn.BatchNorm2d(6), nn.Sigmoid(), nn.MaxPool2d(2, 2),
        nn.Conv2d(6, 16, 5), nn.BatchNorm2d(16), nn.Sigmoid(), nn.MaxPool2d(2, 2),
        FlattenLayer(),
        nn.Linear(16 * 4 * 4, 120), nn.BatchNorm1d(120), nn.Sigmoid(),
        nn.Linear(120, 84), nn.BatchNorm1d(84), nn.Sigmoid(),
        nn.Linear(84, 10))
    batch_size, lr = 64, 0.001
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    loss = torch.nn.CrossEntropyLoss()
    with tracelab.Recorder(run_dir, model=net, optimizer=optimizer, loss_fn=loss,
                           config={"lr": lr, "batch_size": batch_size,
                                   "num_epochs": num_epochs}) as rec:
        for _ in range(num_epochs):
            for idx in batches(len(x_train), batch_size, gen):
                X, y = x_train[idx], y_train[idx]
                y_hat = net(X)
                l = loss(y_hat, y)
                optimizer.zero_grad()
                l.backward()
                optimizer.step()
                rec.step(loss=l, inputs=X, targets=y, outputs=y_hat)
            acc = evaluate_accuracy(x_test, y_test, net, switch_back=bug != "no-train-back")
            was_training = net.training
            net.eval()
            with torch.no_grad():
                out = net(x_test)
            net.train(was_training)
            rec.log("val", metrics={"acc": acc, "loss": loss(out, y_test).item()},
                    inputs=x_test, targets=y_test, outputs=out)


def run_rmsprop(run_dir: str, seed: int = 0, bug: str | None = None, num_epochs: int = 4) -> None:
    assert bug in (None, "no-view"), bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    data_x, data_y = diabetes_raw()
    data = np.concatenate([data_x, data_y[:, None]], axis=1)
    data = (data - data.mean(axis=0)) / data.std(axis=0)
    features = torch.tensor(data[:1500, :-1], dtype=torch.float32)
    labels = torch.tensor(data[:1500, -1], dtype=torch.float32)
    net = nn.Sequential(nn.Linear(features.shape[-1], 1))
    loss = nn.MSELoss()
    hyper = {"lr": 0.01, "alpha": 0.9}
    optimizer = torch.optim.RMSprop(net.parameters(), **hyper)
    batch_size = 10

    def predict(X):
        return net(X) if bug == "no-view" else net(X).view(-1)

    with tracelab.Recorder(run_dir, model=net, optimizer=optimizer, loss_fn=loss,
                           config={**hyper, "batch_size": batch_size}) as rec:
        for _ in range(num_epochs):
            for idx in batches(len(labels), batch_size, gen):
                X, y = features[idx], labels[idx]
                out = predict(X)
                l = loss(out, y) / 2
                optimizer.zero_grad()
                l.backward()
                optimizer.step()
                with torch.no_grad():
                    full = loss(net(features).view(-1), labels).item() / 2
                rec.step(loss=l, inputs=X, targets=y, outputs=out, metrics={"eval_loss": full})
