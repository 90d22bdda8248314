"""A tiny real GAN for the rules' tests (a second or two on one CPU thread): a generator of
1-d samples and a discriminator, after devnag's pytorch-generative-adversarial-networks, two
Adam optimizers, one discriminator step (real then fake) and one generator step per step()."""
from __future__ import annotations

import torch
from torch import nn

import tracelab


def gan(path, *, bug: str | None = None, steps: int = 120, lr: float = 2e-3,
        d_scale: float = 1.0, one_optimizer: bool = False, batch: int = 32):
    """Train and record a GAN on N(4, 1.25); returns the run path. `bug`: None (as published),
    "no-d-zero" (D.zero_grad() left out), "g-steps-d" (the generator step steps the
    discriminator's optimizer). `d_scale` scales the discriminator's initial weights (a small
    one starts it blind: the generator's gradients start tiny and grow as it learns).
    `one_optimizer`: the Recorder is given the generator's optimizer only."""
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(1, 16), nn.ELU(), nn.Linear(16, 16), nn.Sigmoid(),
                      nn.Linear(16, 1))
    D = nn.Sequential(nn.Linear(1, 16), nn.ELU(), nn.Linear(16, 16), nn.ELU(),
                      nn.Linear(16, 1), nn.Sigmoid())
    with torch.no_grad():
        for p in D.parameters():
            p.mul_(d_scale)
    criterion = nn.BCELoss()
    d_opt = torch.optim.Adam(D.parameters(), lr=lr)
    g_opt = torch.optim.Adam(G.parameters(), lr=lr)
    ones, zeros = torch.ones(batch, 1), torch.zeros(batch, 1)
    optimizers = g_opt if one_optimizer else {"G": g_opt, "D": d_opt}
    model = nn.ModuleDict({"G": G, "D": D})
    with tracelab.Recorder(str(path), model=model, optimizer=optimizers,
                           loss_fn=criterion) as rec:
        for _ in range(steps):
            if bug != "no-d-zero":
                D.zero_grad()
            real = 4.0 + 1.25 * torch.randn(batch, 1)
            d_real = criterion(D(real), ones)
            d_real.backward()
            fake = G(torch.rand(batch, 1)).detach()
            d_fake = criterion(D(fake), zeros)
            d_fake.backward()
            d_opt.step()
            G.zero_grad()
            g_loss = criterion(D(G(torch.rand(batch, 1))), ones)
            g_loss.backward()
            (d_opt if bug == "g-steps-d" else g_opt).step()
            rec.step(loss=g_loss, metrics={"loss_D": d_real + d_fake})
    return path
