"""Tiny real trainings for the learning-rate rules' tests: PPO-like rollouts, each batch stepped
on several times in a row, and a GAN whose generator's loss rises as its discriminator learns."""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

import tracelab


def rollouts(path: Path, *, epochs: int = 10, lr: float = 1e-2, blocks: int = 30,
             seed: int = 0) -> Path:
    """A linear regression stepped `epochs` times with Adam on each fresh batch, as PPO steps
    K epochs on each rollout: the batches' noise (0.2 or 2.0 at random) moves the loss's level
    from batch to batch, while the steps lower it on each batch."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(4, 1, generator=g)
    model = nn.Linear(4, 1)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    mse = nn.MSELoss()
    with tracelab.Recorder(str(path), model=model, optimizer=opt, loss_fn=mse) as rec:
        for _ in range(blocks):
            x = torch.randn(64, 4, generator=g)
            sigma = 2.0 if torch.rand(1, generator=g).item() < 0.5 else 0.2
            y = x @ w + sigma * torch.randn(64, 1, generator=g)
            for _ in range(epochs):
                opt.zero_grad()
                loss = mse(model(x), y)
                loss.backward()
                opt.step()
                rec.step(loss=loss, inputs=x, targets=y, outputs=model(x).detach())
    return path


def ring_gan(path: Path, *, steps: int = 400, lr: float = 2e-3, seed: int = 0) -> Path:
    """A GAN on points of a ring: MLP generator and discriminator (sigmoid, mean BCELoss), two
    Adam, one D step then one G step per batch; the Recorder gets the generator's loss, which
    starts near ln 2 (the discriminator at chance) and rises and swings as D learns."""
    torch.manual_seed(seed)
    angles = torch.rand(2048) * 6.2832
    data = torch.stack([angles.cos(), angles.sin()], 1) * 2 + 0.05 * torch.randn(2048, 2)
    G = nn.Sequential(nn.Linear(4, 32), nn.LeakyReLU(0.2), nn.Linear(32, 2))
    D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1), nn.Sigmoid())
    bce = nn.BCELoss()
    opt_g = torch.optim.Adam(G.parameters(), lr=lr)
    opt_d = torch.optim.Adam(D.parameters(), lr=lr)
    with tracelab.Recorder(str(path), model=nn.ModuleDict({"G": G, "D": D}),
                           optimizer={"G": opt_g, "D": opt_d}, loss_fn=bce) as rec:
        for _ in range(steps):
            x = data[torch.randint(0, 2048, (64,))]
            ones, zeros = torch.ones(64, 1), torch.zeros(64, 1)
            opt_d.zero_grad()
            d_loss = bce(D(x), ones) + bce(D(G(torch.randn(64, 4)).detach()), zeros)
            d_loss.backward()
            opt_d.step()
            opt_g.zero_grad()
            g_loss = bce(D(G(torch.randn(64, 4))), ones)
            g_loss.backward()
            opt_g.step()
            rec.step(loss=g_loss, inputs=x)
    return path
