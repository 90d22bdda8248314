"""d2l-en chapter_multilayer-perceptrons/mlp-implementation.md (PyTorch tab), shrunk:
MLPScratch (W1, b1, W2, b2 as parameters drawn with sigma=0.01, the scratch relu()), mean
cross-entropy, lr=0.1 and d2l's hand-written SGD (param -= lr * param.grad, its own
zero_grad(); no torch optimizer) in d2l.Trainer's order (zero_grad, backward and step under
no_grad), validation at each epoch's end. 8x8 digits (64 inputs, 256 hidden units) in [0, 1]
instead of Fashion-MNIST; batch size 64 and 12 epochs instead of 256 and 10.

Bug (`bug=`): "negative-bias" (b1 initialized to -1 instead of zeros, so every hidden ReLU
starts below zero)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import tracelab
from _b_data import batches, digits


def relu(X):
    a = torch.zeros_like(X)
    return torch.max(X, a)


class MLPScratch(nn.Module):
    def __init__(self, num_inputs, num_outputs, num_hiddens, sigma=0.01, b1_init=0.0):
        super().__init__()
        self.num_inputs = num_inputs
        self.W1 = nn.Parameter(torch.randn(num_inputs, num_hiddens) * sigma)
        self.b1 = nn.Parameter(torch.full((num_hiddens,), b1_init))
        self.W2 = nn.Parameter(torch.randn(num_hiddens, num_outputs) * sigma)
        self.b2 = nn.Parameter(torch.zeros(num_outputs))

    def forward(self, X):
        X = torch.reshape(X, (-1, self.num_inputs))
        H = relu(torch.matmul(X, self.W1) + self.b1)
        return torch.matmul(H, self.W2) + self.b2


class SGD:
    """d2l's minibatch stochastic gradient descent."""

    def __init__(self, params, lr):
        self.params, self.lr = list(params), lr

    def step(self):
        for param in self.params:
            param -= self.lr * param.grad

    def zero_grad(self):
        for param in self.params:
            if param.grad is not None:
                param.grad.zero_()


def train(run_dir: str, seed: int = 0, *, bug: str | None = None, max_epochs: int = 12,
          lr: float = 0.1) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_tr, y_tr, x_va, y_va = digits(seed)
    x_tr, x_va = x_tr.float() / 255.0, x_va.float() / 255.0
    model = MLPScratch(64, 10, 256, sigma=0.01, b1_init=-1.0 if bug == "negative-bias" else 0.0)
    optim = SGD(model.parameters(), lr)
    with tracelab.Recorder(run_dir, model=model, config={"lr": lr, "batch_size": 64}) as rec:
        for _ in range(max_epochs):
            model.train()
            for idx in batches(len(x_tr), 64, gen):
                X, Y = x_tr[idx], y_tr[idx]
                Y_hat = model(X)
                loss = F.cross_entropy(Y_hat, Y)
                optim.zero_grad()
                with torch.no_grad():
                    loss.backward()
                    optim.step()
                rec.step(loss=loss, inputs=X, targets=Y, outputs=Y_hat)
            model.eval()
            with torch.no_grad():
                out = model(x_va)
                acc = (out.argmax(1) == y_va).float().mean()
            rec.log("val", metrics={"loss": F.cross_entropy(out, y_va), "acc": acc},
                    inputs=x_va, targets=y_va, outputs=out)
