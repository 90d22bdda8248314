"""Tiny real trainings for the contract rules' tests (a second or two on one CPU thread): a
classifier, a regressor or a sequence model on synthetic data, recorded with tracelab.Recorder,
with what enters the loss, the loss function and the modes chosen by each test."""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

import tracelab


def blobs(n: int, features: int = 16, classes: int = 4, seed: int = 0):
    """Separable classes: each class a Gaussian blob around its own centre."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes, features, generator=g) * 2
    y = torch.randint(0, classes, (n,), generator=g)
    return centres[y] + torch.randn(n, features, generator=g), y


def regression(n: int, features: int = 8, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    return x, x @ torch.randn(features, generator=g) + 0.1 * torch.randn(n, generator=g)


def train(path, model: nn.Module, data, loss_of: Callable[[Any, Any], torch.Tensor], *,
          loss_fn: Any = None, outputs_of: Callable[[Any], Any] = lambda out: out,
          steps: int = 60, batch: int = 32, lr: float = 1e-2, val_every: int = 0,
          after_val: Callable[[nn.Module], None] = lambda model: None,
          optimizer: torch.optim.Optimizer | None = None):
    """Train `model` on `data` (x, y) in batches; validate every `val_every` steps (eval mode,
    then `after_val(model)`, which sets the mode training goes on in). Returns the run path."""
    torch.manual_seed(0)
    x, y = data
    opt = optimizer or torch.optim.Adam([p for p in model.parameters() if p.requires_grad],
                                        lr=lr)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=loss_fn,
                           input_every=5) as rec:
        for step in range(steps):
            i = (step * batch) % (len(x) - batch + 1)
            xb, yb = x[i:i + batch], y[i:i + batch]
            opt.zero_grad()
            out = model(xb)
            loss = loss_of(out, yb)
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xb, targets=yb, outputs=outputs_of(out))
            if val_every and (step + 1) % val_every == 0:
                model.eval()
                with torch.no_grad():
                    val = loss_of(model(x[:batch]), y[:batch])
                rec.log("val", metrics={"loss": val})
                after_val(model)
    return path


def inner_loop(path, lr: float, inner: int = 20, steps: int = 30):
    """Adam stepped `inner` times per recorded step on one batch of noise targets (an inner loop
    before Recorder.step(), as spinningup's value function takes 80 steps per epoch): the
    recorded update sums those steps; the loss recorded is the inner loop's first."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                          nn.Linear(32, 1))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    with tracelab.Recorder(str(path), model=model, optimizer=opt, every=1,
                           weight_every=1) as rec:
        for _ in range(steps):
            x, y = torch.randn(64, 8, generator=g), torch.randn(64, generator=g)
            first = None
            for _ in range(inner):
                opt.zero_grad()
                loss = ((model(x)[:, 0] - y) ** 2).mean()
                loss.backward()
                opt.step()
                first = loss.detach() if first is None else first
            rec.step(loss=first, inputs=x, targets=y)
    return tracelab.open_run(path)


def q_regression(path, *, reward: float, lr: float, bootstrap: bool, steps: int):
    """A tiny Q regression, a reward of `reward` on every transition: targets
    reward + 0.9 * max Q(s') computed under no_grad from the network being trained
    (`bootstrap`: a DQN's, rising with its Q-values toward reward / 0.1), or
    reward + 0.9 * s'.sum() drawn from one data set (not `bootstrap`). Recorded with targets=
    and outputs=."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    q = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.Adam(q.parameters(), lr=lr)
    with tracelab.Recorder(str(path), model=q, optimizer=opt, loss_fn=nn.MSELoss()) as rec:
        for _ in range(steps):
            s, s2 = torch.randn(32, 4, generator=g), torch.randn(32, 4, generator=g)
            with torch.no_grad():
                nxt = q(s2).max(1, keepdim=True)[0] if bootstrap else s2.sum(1, keepdim=True)
                target = reward + 0.9 * nxt
            out = q(s)[:, :1]
            loss = nn.functional.mse_loss(out, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=s, targets=target, outputs=out)
    return tracelab.open_run(path)


def full_batch(path, train, val, *, steps: int):
    """A linear model trained on the same rows at every step (full batch: pygcn, a small
    regression), its validation rows evaluated whole at every step; inputs recorded for both
    splits. `train`, `val`: 2-D arrays of features."""
    xt, xv = (torch.tensor(a, dtype=torch.float32) for a in (train, val))
    torch.manual_seed(0)
    model = nn.Linear(xt.shape[1], 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with tracelab.Recorder(str(path), model, opt, flush_interval=0.2) as rec:
        for _ in range(steps):
            loss = model(xt).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=xt)
            with torch.no_grad():
                val_loss = model(xv).pow(2).mean()
            rec.log("val", metrics={"loss": val_loss}, inputs=xv)
    return tracelab.open_run(path)
