"""dsgiitr/d2l-pytorch Ch06 Implementation_of_Multilayer_Perceptron_from_Scratch.ipynb, shrunk:
its Net (nn.Parameters W1 (inputs, 256) and W2 (256, 10) drawn as randn * 0.01, zero biases,
a hand-written relu = max(s, 0)), criterion = nn.CrossEntropyLoss(), and d2l.train_ch3
(d2l/train.py): SGD(net.parameters(), lr=0.5), zero_grad / forward / loss / backward / step per
batch, test accuracy per epoch. Data: scikit-learn's digits (64 pixels instead of
Fashion-MNIST's 784); batch 64 (of 256), 12 epochs (of 10, on a set 40 times smaller).

`bug` (None: as published):
- "no-zero": optimizer.zero_grad() left out of the batch loop.
"""
from __future__ import annotations

import torch
import torch.nn as nn

import tracelab
from _x_data import batches, digits

SOURCE = ("https://github.com/dsgiitr/d2l-pytorch/blob/c20644455b3de8288788590664c0658f3290f2c4/"
          "Ch06_Multilayer_Perceptrons/Implementation_of_Multilayer_Perceptron_from_Scratch.ipynb")
BUGS = (None, "no-zero")


class Net(nn.Module):
    def __init__(self, num_inputs=64):
        super().__init__()
        self.num_inputs = num_inputs
        self.W1 = nn.Parameter(torch.randn(num_inputs, 256) * 0.01)
        self.b1 = nn.Parameter(torch.zeros(256))
        self.W2 = nn.Parameter(torch.randn(256, 10) * 0.01)
        self.b2 = nn.Parameter(torch.zeros(10))

    def forward(self, X):
        X = X.reshape((-1, self.num_inputs))
        H = self.relu(X @ self.W1 + self.b1)
        return H @ self.W2 + self.b2

    def relu(self, s):
        return torch.max(s, torch.zeros_like(s))


def run(run_dir: str, seed: int = 0, bug: str | None = None, num_epochs: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_tr, y_tr, x_te, y_te = digits(seed)
    net = Net()
    criterion = nn.CrossEntropyLoss()
    lr, batch_size = 0.5, 64
    optimizer = torch.optim.SGD(net.parameters(), lr=lr)
    with tracelab.Recorder(run_dir, model=net, optimizer=optimizer, loss_fn=criterion,
                           config={"lr": lr, "batch_size": batch_size,
                                   "num_epochs": num_epochs}) as rec:
        for _ in range(num_epochs):
            for idx in batches(len(x_tr), batch_size, gen):
                X, y = x_tr[idx], y_tr[idx]
                if bug != "no-zero":
                    optimizer.zero_grad()
                y_hat = net(X)
                loss = criterion(y_hat, y)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=X, targets=y, outputs=y_hat)
            with torch.no_grad():
                y_hat = net(x_te)
                acc = (y_hat.argmax(1) == y_te).float().mean().item()
                test_loss = criterion(y_hat, y_te).item()
            rec.log("val", metrics={"loss": test_loss, "acc": acc}, inputs=x_te, targets=y_te,
                    outputs=y_hat)
