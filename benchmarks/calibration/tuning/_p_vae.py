"""Atcold/NYU-DLSP20 11-VAE.ipynb, shrunk: its VAE (encoder Linear(784, 400), ReLU,
Linear(400, 40) read as mu and logvar; reparameterise only in training; decoder Linear(20, 400),
ReLU, Linear(400, 784), Sigmoid), loss_function = binary_cross_entropy(reduction='sum') +
KLD = 0.5 * sum(exp(logvar) - logvar - 1 + mu^2), Adam(lr=1e-3), batch 256, model.train() /
model.eval() under no_grad for the test pass, test loss per sample; 12 epochs instead of 10.
Data: scikit-learn's 8x8 digits upsampled to 28x28 in 0-1 (ToTensor()), 300 held out.

`bug` (None: the notebook as published):
- "kld-sign": KLD written with the opposite sign (-0.5 * sum(exp(logvar) - logvar - 1 + mu^2)),
  so the optimizer maximizes the divergence from the prior.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import tracelab
from _p_data import digits

SOURCE = ("https://github.com/Atcold/NYU-DLSP20/blob/3049c83260ba05700e2ab9b7ed13cdbe5ddba0fd/"
          "11-VAE.ipynb")
BUGS = (None, "kld-sign")
d = 20


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(784, d ** 2), nn.ReLU(), nn.Linear(d ** 2, d * 2))
        self.decoder = nn.Sequential(nn.Linear(d, d ** 2), nn.ReLU(), nn.Linear(d ** 2, 784),
                                     nn.Sigmoid())

    def reparameterise(self, mu, logvar):
        if self.training:
            std = logvar.mul(0.5).exp_()
            eps = std.new_empty(std.size()).normal_()
            return eps.mul_(std).add_(mu)
        return mu

    def forward(self, x):
        mu_logvar = self.encoder(x.view(-1, 784)).view(-1, 2, d)
        mu, logvar = mu_logvar[:, 0, :], mu_logvar[:, 1, :]
        z = self.reparameterise(mu, logvar)
        return self.decoder(z), mu, logvar


def loss_function(x_hat, x, mu, logvar, beta=1, sign=1.0):
    bce = nn.functional.binary_cross_entropy(x_hat, x.view(-1, 784), reduction="sum")
    kld = sign * 0.5 * torch.sum(logvar.exp() - logvar - 1 + mu.pow(2))
    return bce + beta * kld


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    x_tr, _, x_te, _ = digits(seed)
    up = lambda x: F.interpolate(x.float() / 255.0, size=(28, 28), mode="bilinear",
                                 align_corners=False).clamp(0, 1)
    x_tr, x_te = up(x_tr), up(x_te)
    sign = -1.0 if bug == "kld-sign" else 1.0
    model = VAE()
    learning_rate = 1e-3
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    gen = torch.Generator().manual_seed(seed)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer,
                           config={"lr": learning_rate, "batch_size": 256, "d": d}) as rec:
        for epoch in range(epochs):
            model.train()
            for idx in torch.randperm(len(x_tr), generator=gen).split(256):
                x = x_tr[idx]
                x_hat, mu, logvar = model(x)
                loss = loss_function(x_hat, x, mu, logvar, sign=sign)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=x, targets=x.view(-1, 784), outputs=x_hat)
            with torch.no_grad():
                model.eval()
                x_hat, mu, logvar = model(x_te)
                test_loss = loss_function(x_hat, x_te, mu, logvar, sign=sign).item() / len(x_te)
                recon = F.binary_cross_entropy(x_hat, x_te.view(-1, 784), reduction="sum").item()
            rec.log("val", metrics={"loss": test_loss, "reconstruction": recon / len(x_te)},
                    inputs=x_te, targets=x_te.view(-1, 784), outputs=x_hat)
    print(f"    vae bug={bug}: test loss {test_loss:.2f} reconstruction {recon / len(x_te):.2f}")
