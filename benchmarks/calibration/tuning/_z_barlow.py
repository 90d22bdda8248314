"""facebookresearch/barlowtwins main.py, shrunk: BarlowTwins (backbone with fc = Identity, a
projector Linear(no bias)-BatchNorm1d-ReLU ... Linear(no bias), an affine-free BatchNorm1d on
both embeddings, the cross-correlation matrix divided by the batch size, loss = on-diagonal
(c_ii - 1)^2 + lambd * off-diagonal c_ij^2 with lambd 0.0051), LARS (weights and biases/BN in two
param groups, weight decay 1e-6 and the trust ratio eta 0.001 skipped for 1-D parameters,
momentum 0.9) and adjust_learning_rate() called with the global step before every update
(linear warm-up, then cosine to 0.001 * base; base = batch_size / 256 times 0.2 for weights and
0.0048 for biases). The backbone is a small CNN (resnet50 stand-in) on scikit-learn's 8x8 digits
with a random shift, brightness jitter and Gaussian noise as the two views; projector
32-128-128-128, batch 128, 12 epochs with 1 warm-up epoch (10 of 1000 in the script), no AMP.
After each epoch a nearest-class-mean probe on the backbone features measures the
representation on the validation split. Healthy only (`bug` None: the script as published).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

import tracelab
from _z_data import batches, digits

SOURCE = ("https://github.com/facebookresearch/barlowtwins/blob/"
          "8e8d284ca0bc02f88b92328e53f9b901e86b4a3c/main.py")
BUGS = (None,)


def off_diagonal(x):
    n, m = x.shape
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc = nn.Identity()

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.mean((2, 3)))


class BarlowTwins(nn.Module):
    def __init__(self, batch_size, lambd=0.0051, projector="128-128-128"):
        super().__init__()
        self.batch_size, self.lambd = batch_size, lambd
        self.backbone = Backbone()
        sizes = [32] + list(map(int, projector.split("-")))
        layers = []
        for i in range(len(sizes) - 2):
            layers.append(nn.Linear(sizes[i], sizes[i + 1], bias=False))
            layers.append(nn.BatchNorm1d(sizes[i + 1]))
            layers.append(nn.ReLU(inplace=True))
        layers.append(nn.Linear(sizes[-2], sizes[-1], bias=False))
        self.projector = nn.Sequential(*layers)
        self.bn = nn.BatchNorm1d(sizes[-1], affine=False)

    def forward(self, y1, y2):
        z1 = self.projector(self.backbone(y1))
        z2 = self.projector(self.backbone(y2))
        c = self.bn(z1).T @ self.bn(z2)
        c.div_(self.batch_size)
        on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
        off_diag = off_diagonal(c).pow_(2).sum()
        return on_diag + self.lambd * off_diag, c


class LARS(optim.Optimizer):
    def __init__(self, params, lr, weight_decay=0, momentum=0.9, eta=0.001,
                 weight_decay_filter=False, lars_adaptation_filter=False):
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, eta=eta,
                        weight_decay_filter=weight_decay_filter,
                        lars_adaptation_filter=lars_adaptation_filter)
        super().__init__(params, defaults)

    def exclude_bias_and_norm(self, p):
        return p.ndim == 1

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g["params"]:
                dp = p.grad
                if dp is None:
                    continue
                if not g["weight_decay_filter"] or not self.exclude_bias_and_norm(p):
                    dp = dp.add(p, alpha=g["weight_decay"])
                if not g["lars_adaptation_filter"] or not self.exclude_bias_and_norm(p):
                    param_norm = torch.norm(p)
                    update_norm = torch.norm(dp)
                    one = torch.ones_like(param_norm)
                    q = torch.where(param_norm > 0.,
                                    torch.where(update_norm > 0,
                                                (g["eta"] * param_norm / update_norm), one), one)
                    dp = dp.mul(q)
                param_state = self.state[p]
                if "mu" not in param_state:
                    param_state["mu"] = torch.zeros_like(p)
                mu = param_state["mu"]
                mu.mul_(g["momentum"]).add_(dp)
                p.add_(mu, alpha=-g["lr"])


def adjust_learning_rate(epochs, batch_size, n_batches, optimizer, step, lr_w=0.2, lr_b=0.0048,
                         warmup_epochs=1):
    max_steps = epochs * n_batches
    warmup_steps = warmup_epochs * n_batches
    base_lr = batch_size / 256
    if step < warmup_steps:
        lr = base_lr * step / warmup_steps
    else:
        step -= warmup_steps
        max_steps -= warmup_steps
        q = 0.5 * (1 + math.cos(math.pi * step / max_steps))
        end_lr = base_lr * 0.001
        lr = base_lr * q + end_lr * (1 - q)
    optimizer.param_groups[0]["lr"] = lr * lr_w
    optimizer.param_groups[1]["lr"] = lr * lr_b


def augment(x, gen):
    dx, dy = (int(v) for v in torch.randint(-1, 2, (2,), generator=gen))
    x = torch.roll(x, shifts=(dx, dy), dims=(2, 3))
    x = x * (0.6 + 0.8 * torch.rand(len(x), 1, 1, 1, generator=gen))
    x = x + 0.1 * torch.randn(x.shape, generator=gen)
    return (x - 0.3) / 0.4


def probe(backbone, x_train, y_train, x_val, y_val):
    norm = lambda x: (x - 0.3) / 0.4
    with torch.no_grad():
        h_tr = F.normalize(backbone(norm(x_train)), dim=1)
        h_va = F.normalize(backbone(norm(x_val)), dim=1)
    means = torch.stack([h_tr[y_train == c].mean(0) for c in range(10)])
    return (F.normalize(means, dim=1) @ h_va.T).argmax(0).eq(y_val).float().mean().item()


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, y_train, x_val, y_val = digits(seed)
    batch_size = 128
    n = len(x_train) // batch_size * batch_size          # drop_last, as the loader is sharded
    model = BarlowTwins(batch_size)
    param_weights, param_biases = [], []
    for param in model.parameters():
        (param_biases if param.ndim == 1 else param_weights).append(param)
    parameters = [{"params": param_weights}, {"params": param_biases}]
    optimizer = LARS(parameters, lr=0, weight_decay=1e-6, weight_decay_filter=True,
                     lars_adaptation_filter=True)
    n_batches = n // batch_size
    config = {"epochs": epochs, "batch_size": batch_size, "learning_rate_weights": 0.2,
              "learning_rate_biases": 0.0048, "weight_decay": 1e-6, "lambd": 0.0051,
              "projector": "128-128-128", "optimizer": "LARS"}
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, config=config) as rec:
        step = 0
        for epoch in range(epochs):
            model.train()
            for idx in batches(len(x_train), batch_size, gen)[:n_batches]:
                if len(idx) < batch_size:
                    continue
                x = x_train[idx]
                y1, y2 = augment(x, gen), augment(x, gen)
                adjust_learning_rate(epochs, batch_size, n_batches, optimizer, step)
                optimizer.zero_grad()
                loss, c = model.forward(y1, y2)
                loss.backward()
                optimizer.step()
                step += 1
                rec.step(loss=loss, inputs=y1, outputs=c)
            model.eval()
            acc = probe(model.backbone, x_train, y_train, x_val, y_val)
            with torch.no_grad():
                idx = torch.arange(batch_size)
                val_loss, _ = model(augment(x_val[idx], gen), augment(x_val[idx], gen))
            rec.log("val", metrics={"loss": float(val_loss), "probe_acc": acc})
