"""A real tiny VAE (an MLP encoder and decoder on rank-2 data in 16 dimensions, Adam), trained
for the tests of the rules that read the loss curve's shape: its loss is a sum of two terms, the
reconstruction error (mean squared) and `beta` times the KL divergence of the posterior, where
`beta` follows a schedule (Bowman et al.'s KL warm-up switched on at one step, Fu et al.'s
cyclical annealing), so the loss jumps and swings with the KL's weight while the fit, logged as
the metric `recon_loss`, keeps descending."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

import tracelab


def cyclical(period: int, top: float) -> Callable[[int], float]:
    """Fu et al.'s cyclical annealing: beta ramps from 0 to `top` over the first half of each
    `period` steps and holds there over the second."""
    return lambda step: top * min(1.0, 2 * (step % period) / period)


def switched_on(at: int, top: float) -> Callable[[int], float]:
    """A KL term switched on at step `at` with weight `top` (0 before)."""
    return lambda step: top if step >= at else 0.0


def train(path, beta: Callable[[int], float], *, steps: int = 300, lr: float = 3e-3,
          log_term: bool = True, kick_at: int | None = None, seed: int = 0,
          log_best: bool = False):
    """Train the VAE for `steps` steps of 256 samples; `log_term`: the reconstruction error
    logged as the metric `recon_loss`; `kick_at`: before that step the decoder's output layer
    is scaled 10-fold (an update that overshot), which throws the reconstruction error up;
    `log_best`: the best loss so far logged as the metric `best_loss`. Returns the run path."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(1024, 2, generator=g) @ torch.randn(2, 16, generator=g)
         + 0.01 * torch.randn(1024, 16, generator=g))
    latent = 4
    model = nn.ModuleDict({
        "enc": nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 2 * latent)),
        "dec": nn.Sequential(nn.Linear(latent, 32), nn.Tanh(), nn.Linear(32, 16))})
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    best = float("inf")
    with tracelab.Recorder(str(path), model=model, optimizer=opt) as rec:
        for step in range(steps):
            xb = x[torch.randint(len(x), (256,), generator=g)]
            if step == kick_at:
                with torch.no_grad():
                    model["dec"][2].weight.mul_(10.0)
            mu, logvar = model["enc"](xb).chunk(2, dim=1)
            z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
            recon = F.mse_loss(model["dec"](z), xb)
            kl = -0.5 * torch.sum(1 + logvar - mu ** 2 - logvar.exp()) / len(xb)
            loss = recon + beta(step) * kl
            opt.zero_grad()
            loss.backward()
            opt.step()
            best = min(best, loss.item())
            metrics = {"recon_loss": recon.item()} if log_term else {}
            if log_best:
                metrics["best_loss"] = best
            rec.step(loss=loss, inputs=xb, targets=xb, metrics=metrics or None)
    return path
