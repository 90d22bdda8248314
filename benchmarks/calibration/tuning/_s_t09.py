"""AntixK/PyTorch-VAE, models/vanilla_vae.py with experiment.py: conv encoder (BN, LeakyReLU),
mu and log_var heads, a transposed-conv decoder with Tanh, loss = MSE + kld_weight * KLD with
kld_weight the batch's share of the data, Adam lr 0.005 and ExponentialLR 0.95; the 8x8 digits,
hidden dims 16 and 32, latent 4."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from _s_common import batches, digits, log, recorder, setup, step


class VanillaVAE(nn.Module):
    def __init__(self, latent: int = 4):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.LeakyReLU(),
            nn.Conv2d(16, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.LeakyReLU())
        self.fc_mu, self.fc_var = nn.Linear(32 * 4, latent), nn.Linear(32 * 4, latent)
        self.decoder_input = nn.Linear(latent, 32 * 4)
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(32, 16, 3, 2, 1, output_padding=1), nn.BatchNorm2d(16), nn.LeakyReLU())
        self.final_layer = nn.Sequential(
            nn.ConvTranspose2d(16, 16, 3, 2, 1, output_padding=1), nn.BatchNorm2d(16), nn.LeakyReLU(),
            nn.Conv2d(16, 1, 3, padding=1), nn.Tanh())

    def forward(self, x):
        h = self.encoder(x).flatten(1)
        mu, log_var = self.fc_mu(h), self.fc_var(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * log_var)
        out = self.final_layer(self.decoder(self.decoder_input(z).view(-1, 32, 2, 2)))
        return out, mu, log_var


def loss_function(recons, x, mu, log_var, kld_weight: float, sign: float):
    recons_loss = F.mse_loss(recons, x)
    kld_loss = torch.mean(sign * 0.5 * torch.sum(1 + log_var - mu ** 2 - log_var.exp(), dim=1), dim=0)
    return recons_loss + kld_weight * kld_loss


def train(run_dir: str, seed: int, *, kld_sign: float = -1.0) -> None:
    g = setup(seed)
    xtr, _, xva, _ = digits()
    xtr, xva = xtr.view(-1, 1, 8, 8) / 8 - 1, xva.view(-1, 1, 8, 8) / 8 - 1
    model = VanillaVAE()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.95)
    kld_weight = 64 / len(xtr)
    with recorder(run_dir, model, optimizer, config={"lr": 0.005, "batch_size": 64, "kld_weight": kld_weight}) as rec:
        for _ in range(6):
            model.train()
            for idx in batches(len(xtr), 64, g, drop_last=True):
                x = xtr[idx]
                recons, mu, log_var = model(x)
                loss = loss_function(recons, x, mu, log_var, kld_weight, kld_sign)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                step(rec, loss=loss, inputs=x, targets=x, outputs=recons)
            scheduler.step()
            model.eval()
            with torch.no_grad():
                recons, mu, log_var = model(xva)
                vloss = loss_function(recons, xva, mu, log_var, kld_weight, kld_sign)
            log(rec, "val", metrics={"loss": float(vloss)}, inputs=xva, targets=xva, outputs=recons)
