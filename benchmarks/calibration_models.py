"""The synthetic tasks, models, schedules and optimizers of benchmarks/calibration_synthetic.py.

Every function takes the scenario (a `calibration_synthetic.Scenario`: arch, opt, lr, fault,
classes, schedule) and builds what it names; nothing here records or analyzes.
"""
from __future__ import annotations

import math

import torch
from torch import nn


# -- data -----------------------------------------------------------------------------------------
def squares(n: int, classes: int, g: torch.Generator):
    """The CNN task: 10x10 noise images with a bright square in the corner of their class."""
    y = torch.randint(classes, (n,), generator=g)
    x = 0.5 * torch.randn(n, 1, 10, 10, generator=g)
    for i in range(n):
        r, c = divmod(int(y[i]), 2)
        x[i, 0, 1 + 5 * r:4 + 5 * r, 1 + 5 * c:4 + 5 * c] += 1.5
    return x, y


class Data:
    """Synthetic learnable tasks; fresh samples per batch unless the fault says otherwise."""

    def __init__(self, sc, seed: int, steps: int = 300):
        self.sc, self.steps = sc, steps
        self.g = torch.Generator().manual_seed(seed)
        g = torch.Generator().manual_seed(1234)  # the task itself is the same for every run
        self.teacher = (torch.randn(20, 16, generator=g), torch.randn(16, sc.classes, generator=g))
        self.fixed = None
        if sc.fault == "tiny_train_set":
            self.fixed = self._fresh(64)
            flip = torch.rand(64, generator=self.g) < 0.3  # label noise to memorize
            y = self.fixed[1].clone()
            y[flip] = torch.randint(sc.classes, (int(flip.sum()),), generator=self.g)
            self.fixed = (self.fixed[0], y)

    def _fresh(self, n: int):
        arch, k = self.sc.arch, self.sc.classes
        if arch == "cnn":
            return squares(n, k, self.g)
        if arch == "gru":
            x = torch.randn(n, 10, 3, generator=self.g)
            y = (x[:, :, 0].sum(1) + 0.5 * x[:, -3:, 1].sum(1) > 0).long()
            return x, y
        if arch in TOKEN_ARCHS:  # a topic per class: half the tokens come from its own range
            y = torch.randint(k, (n,), generator=self.g)
            noise = torch.randint(VOCAB, (n, SEQ), generator=self.g)
            own = y[:, None] * 5 + torch.randint(5, (n, SEQ), generator=self.g)
            pick = torch.rand(n, SEQ, generator=self.g) < 0.5
            return torch.where(pick, own, noise), y
        x = torch.randn(n, 20, generator=self.g)
        a, b = self.teacher
        logits = torch.tanh(x @ a) @ b
        if k == 1:  # regression on a standardized target, with a little noise
            return x, logits[:, :1] / 3.0 + 0.1 * torch.randn(n, 1, generator=self.g)
        return x, logits.argmax(1)

    def batch(self, step: int, n: int):
        if self.fixed is not None:
            idx = torch.randint(len(self.fixed[0]), (n,), generator=self.g)
            x, y = self.fixed[0][idx], self.fixed[1][idx]
        else:
            x, y = self._fresh(n)
        if self.sc.fault == "random_labels":
            y = torch.randint(self.sc.classes, (n,), generator=self.g)
        if self.sc.fault == "input_collapse" and step >= self.steps // 2:
            x = x.round()  # a cast to whole numbers mid-run: every feature loses its fraction
        return self._scale(x), y

    def _scale(self, x):
        if not x.is_floating_point():
            return x
        if self.sc.fault == "unnormalized":
            return 30 * x + 5
        if self.sc.fault == "input_scale":
            return 200 * x
        return x

    def val(self, n: int = 256):
        x, y = self._fresh(n)
        if self.sc.fault == "random_labels":
            y = torch.randint(self.sc.classes, (n,), generator=self.g)
        if self.sc.fault == "val_shift":  # validation went through another preprocessing
            x = 3.0 * x + 2.0
        return self._scale(x), y


TOKEN_ARCHS = ("transformer", "embedding")
VOCAB, SEQ = 24, 12


# -- models ---------------------------------------------------------------------------------------
class TinyTransformer(nn.Module):
    def __init__(self, classes: int, width: int = 16):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        self.pos = nn.Parameter(0.02 * torch.randn(SEQ, width))
        self.encoder = nn.TransformerEncoderLayer(width, 2, 32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x) + self.pos).mean(1))


class BagOfTokens(nn.Module):
    def __init__(self, classes: int, width: int = 32):
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, width, mode="mean")
        self.hidden = nn.Linear(width, 32)
        self.act = nn.ReLU()
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        return self.head(self.act(self.hidden(self.embed(x))))


class GRUNet(nn.Module):
    def __init__(self, classes: int):
        super().__init__()
        self.gru = nn.GRU(3, 32, batch_first=True)
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        out, _ = self.gru(x)
        return self.head(out[:, -1])


def small_cnn(out: int) -> nn.Module:
    """Two conv-BN-ReLU blocks on the `squares` images, pooled, then a linear head."""
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(64, out))


def build_model(sc) -> nn.Module:
    k = sc.classes
    if sc.arch == "mlp":
        model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                              nn.Linear(64, k))
        if sc.fault == "dying_relu":
            with torch.no_grad():  # a bad bias init: most units start (and stay) off
                model[0].bias.fill_(-4.0)
                model[2].bias.fill_(-4.0)
        return model
    if sc.arch == "cnn":
        return small_cnn(k)
    if sc.arch == "gru":
        return GRUNet(k)
    if sc.arch == "sigmoid10":
        layers: list[nn.Module] = []
        for i in range(10):
            layers += [nn.Linear(20 if i == 0 else 32, 32), nn.Sigmoid()]
        return nn.Sequential(*layers, nn.Linear(32, k))
    if sc.arch == "tanh":
        model = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                              nn.Linear(64, k))
        if sc.fault == "big_init":  # weights 8x too large: the tanh units start saturated
            with torch.no_grad():
                for layer in (model[0], model[2]):
                    layer.weight.mul_(8.0)
        return model
    if sc.arch == "transformer":
        return TinyTransformer(k)
    if sc.arch == "embedding":
        return BagOfTokens(k)
    raise ValueError(f"unknown architecture {sc.arch!r}")


def build_schedule(sc, opt: torch.optim.Optimizer, steps: int):
    if sc.schedule == "warmup-cosine":
        warm = max(1, steps // 15)
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (
            1 + math.cos(math.pi * min(s, steps) / steps)))
    if sc.schedule == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    if sc.schedule == "warmup":
        warm = max(1, steps // 10)
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm))
    if sc.schedule == "step-decay":
        return torch.optim.lr_scheduler.StepLR(opt, step_size=max(1, int(steps * 0.6)), gamma=0.1)
    return None


def build_optimizer(sc, model: nn.Module) -> torch.optim.Optimizer:
    params = list(model.parameters())
    if sc.fault == "frozen_layer":  # the middle layer was left out of the optimizer
        left_out = {id(p) for p in model[2].parameters()}
        params = [p for p in params if id(p) not in left_out]
    if sc.opt == "sgd":
        decay = 0.5 if sc.fault == "weight_decay" else 0.0  # decay crushes every weight
        return torch.optim.SGD(params, lr=sc.lr, momentum=0.9, weight_decay=decay)
    if sc.opt == "adamw":
        return torch.optim.AdamW(params, lr=sc.lr, weight_decay=0.01)
    return torch.optim.Adam(params, lr=sc.lr)
