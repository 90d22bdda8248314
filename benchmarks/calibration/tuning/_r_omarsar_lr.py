"""omarsar/pytorch_notebooks pytorch_logistic_regression.ipynb, shrunk: its LR module written
from scratch (w and b plain zero tensors, z = w.T x without b as published, a hand-written
sigmoid, backward() computing dw and db by hand, optimize() stepping w and b with the learning
rate), the hand-written cross-entropy cost and the accuracy of predict(); full-batch gradient
descent on the flattened, ToTensor()-scaled images, the validation set scored after each
iteration. The data is scikit-learn's digits upsampled to 28x28, "3" against "8" standing in for
the bees and ants; lr 0.0001 -> 0.01 and 100 -> 150 iterations for the 784 features instead of
150,528.

`bug` is None: the notebook as published (its faulty twin was dropped: with one linear layer
the unscaled pixels give a non-finite cost but no loss of accuracy).
"""
from __future__ import annotations

import torch
import torch.nn as nn

import tracelab
from _r_data import digits

SOURCE = ("https://github.com/omarsar/pytorch_notebooks/blob/316c7af2210d11ef0e4c312362560f8d2f4efcb4/"
          "pytorch_logistic_regression.ipynb")
BUGS = (None, "raw-pixels")


class LR(nn.Module):
    def __init__(self, dim, lr=torch.scalar_tensor(0.01)):
        super().__init__()
        self.w = torch.zeros(dim, 1, dtype=torch.float)
        self.b = torch.scalar_tensor(0)
        self.grads = {"dw": torch.zeros(dim, 1, dtype=torch.float), "db": torch.scalar_tensor(0)}
        self.lr = lr

    def forward(self, x):
        z = torch.mm(self.w.T, x)
        return self.sigmoid(z)

    def sigmoid(self, z):
        return 1 / (1 + torch.exp(-z))

    def backward(self, x, yhat, y):
        self.grads["dw"] = (1 / x.shape[1]) * torch.mm(x, (yhat - y).T)
        self.grads["db"] = (1 / x.shape[1]) * torch.sum(yhat - y)

    def optimize(self):
        self.w = self.w - self.lr * self.grads["dw"]
        self.b = self.b - self.lr * self.grads["db"]


def loss(yhat, y):
    m = y.size()[1]
    return -(1 / m) * torch.sum(y * torch.log(yhat) + (1 - y) * torch.log(1 - yhat))


def predict(yhat, y):
    y_prediction = (yhat > 0.5).float()
    return 100 - torch.mean(torch.abs(y_prediction - y)) * 100


def flat(images, bug):
    x = images.float() if bug == "raw-pixels" else images.float() / 255.0
    return x.reshape(len(x), -1)


def run(run_dir: str, seed: int = 0, bug: str | None = None, num_iterations: int = 150) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    x_tr, y_tr, x_te, y_te = digits(seed, n_val=300, size=28)
    keep_tr, keep_te = (y_tr == 3) | (y_tr == 8), (y_te == 3) | (y_te == 8)
    x, y = flat(x_tr[keep_tr], bug), (y_tr[keep_tr] == 8).float()
    xv, yv = flat(x_te[keep_te], bug), (y_te[keep_te] == 8).float()
    x_flatten, y = x.T, y.unsqueeze(0)
    xv_flatten, yv = xv.T, yv.unsqueeze(0)
    dim = x_flatten.shape[0]
    learning_rate = torch.scalar_tensor(0.01)
    lrmodel = LR(dim, learning_rate)
    with tracelab.Recorder(run_dir, model=lrmodel,
                           config={"learning_rate": 0.01, "num_iterations": num_iterations}) as rec:
        for _ in range(num_iterations):
            yhat = lrmodel.forward(x_flatten)
            cost = loss(yhat, y)
            train_acc = predict(yhat, y)
            lrmodel.backward(x_flatten, yhat, y)
            lrmodel.optimize()
            rec.step(loss=cost, inputs=x, targets=y.squeeze(0), outputs=yhat.squeeze(0),
                     metrics={"acc": train_acc})
            yhat_test = lrmodel.forward(xv_flatten)
            rec.log("val", metrics={"loss": loss(yhat_test, yv).item(),
                                    "acc": predict(yhat_test, yv).item()},
                    inputs=xv, targets=yv.squeeze(0), outputs=yhat_test.squeeze(0))
