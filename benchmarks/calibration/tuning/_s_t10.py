"""yunjey/pytorch-tutorial, 03-advanced/variational_autoencoder: fc encoder to mu and log_var,
fc decoder with a sigmoid, loss = binary cross-entropy summed over the batch + KL divergence
summed, Adam lr 1e-3; the digits as 64 pixels, hidden 64, latent 8."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from _s_common import batches, digits, log, recorder, setup, step


class VAE(nn.Module):
    def __init__(self, image_size: int = 64, h_dim: int = 64, z_dim: int = 8):
        super().__init__()
        self.fc1 = nn.Linear(image_size, h_dim)
        self.fc2 = nn.Linear(h_dim, z_dim)
        self.fc3 = nn.Linear(h_dim, z_dim)
        self.fc4 = nn.Linear(z_dim, h_dim)
        self.fc5 = nn.Linear(h_dim, image_size)

    def forward(self, x):
        h = F.relu(self.fc1(x))
        mu, log_var = self.fc2(h), self.fc3(h)
        z = mu + torch.randn_like(mu) * torch.exp(log_var / 2)
        return torch.sigmoid(self.fc5(F.relu(self.fc4(z)))), mu, log_var


def train(run_dir: str, seed: int, *, lr: float = 1e-3) -> None:
    g = setup(seed)
    xtr, _, xva, _ = digits()
    xtr, xva = xtr / 16, xva / 16
    model = VAE()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    with recorder(run_dir, model, optimizer, config={"lr": lr, "batch_size": 128}) as rec:
        for _ in range(12):
            for idx in batches(len(xtr), 128, g):
                x = xtr[idx]
                x_reconst, mu, log_var = model(x)
                kl_div = -0.5 * torch.sum(1 + log_var - mu.pow(2) - log_var.exp())
                loss = F.binary_cross_entropy(x_reconst, x, reduction="sum") + kl_div
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                step(rec, loss=loss, inputs=x, targets=x, outputs=x_reconst)
            with torch.no_grad():
                x_reconst, mu, log_var = model(xva)
                kl_div = -0.5 * torch.sum(1 + log_var - mu.pow(2) - log_var.exp())
                vloss = (F.binary_cross_entropy(x_reconst, xva, reduction="sum") + kl_div) / len(xva) * 128
            log(rec, "val", metrics={"loss": float(vloss)}, inputs=xva, targets=xva, outputs=x_reconst)
