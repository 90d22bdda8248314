"""wiseodd/generative-models VAE/vanilla_vae/vae_pytorch.py, shrunk: Q(z|X) (fc h_dim=128 with
ReLU, then mu and log-variance heads), the reparameterized sample, P(X|z) (fc 128 with ReLU, fc
to the pixels, sigmoid), Xavier-style init, recon_loss = binary_cross_entropy summed over the
batch / mb_size plus the KL term averaged over the batch, Adam(lr=1e-3), mb_size 64, and the
script's "housekeeping": after solver.step() every parameter's grad replaced by zeros. The
script keeps bare tensors; here they are the nn.Parameters of one module (same shapes, same
init, same math) so that a Recorder can be given the model. The data is scikit-learn's 8x8
digits scaled to [0, 1] (X_dim 64 instead of 784), Z_dim 100 becomes 16 and 100000
iterations 1000; the held-out digits' loss is logged every 100 iterations.

`bug` plants one fault (None: the script as published):
- "no-zero": the housekeeping loop that resets the grads left out, so they add up across
  iterations;
- "kl-sign": the KL term written with its sign flipped (-0.5 * sum(exp(logvar) + mu^2 - 1 -
  logvar)), so the loss rewards a posterior far from the prior.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab
from _t_data import digits, to_tensor

SOURCE = ("https://github.com/wiseodd/generative-models/blob/"
          "b930d5fa9e2f69adfd4ea8ec759f38f6ce6da4c2/VAE/vanilla_vae/vae_pytorch.py")
BUGS = (None, "no-zero", "kl-sign")


def xavier_init(size):
    in_dim = size[0]
    xavier_stddev = 1.0 / np.sqrt(in_dim / 2.0)
    return nn.Parameter(torch.randn(*size) * xavier_stddev)


class VAE(nn.Module):
    def __init__(self, X_dim, h_dim, Z_dim):
        super().__init__()
        self.Wxh, self.bxh = xavier_init([X_dim, h_dim]), nn.Parameter(torch.zeros(h_dim))
        self.Whz_mu, self.bhz_mu = xavier_init([h_dim, Z_dim]), nn.Parameter(torch.zeros(Z_dim))
        self.Whz_var, self.bhz_var = xavier_init([h_dim, Z_dim]), nn.Parameter(torch.zeros(Z_dim))
        self.Wzh, self.bzh = xavier_init([Z_dim, h_dim]), nn.Parameter(torch.zeros(h_dim))
        self.Whx, self.bhx = xavier_init([h_dim, X_dim]), nn.Parameter(torch.zeros(X_dim))
        self.Z_dim = Z_dim

    def Q(self, X):
        h = F.relu(X @ self.Wxh + self.bxh.repeat(X.size(0), 1))
        z_mu = h @ self.Whz_mu + self.bhz_mu.repeat(h.size(0), 1)
        z_var = h @ self.Whz_var + self.bhz_var.repeat(h.size(0), 1)
        return z_mu, z_var

    def P(self, z):
        h = F.relu(z @ self.Wzh + self.bzh.repeat(z.size(0), 1))
        return torch.sigmoid(h @ self.Whx + self.bhx.repeat(h.size(0), 1))

    def forward(self, X, eps):
        z_mu, z_var = self.Q(X)
        z = z_mu + torch.exp(z_var / 2) * eps
        return self.P(z), z_mu, z_var


def vae_loss(X_sample, X, z_mu, z_var, kl_sign=1.0):
    recon_loss = F.binary_cross_entropy(X_sample, X, reduction="sum") / X.size(0)
    kl_loss = torch.mean(kl_sign * 0.5 * torch.sum(torch.exp(z_var) + z_mu ** 2 - 1.0 - z_var, 1))
    return recon_loss + kl_loss


def run(run_dir: str, seed: int = 0, bug: str | None = None, iters: int = 1000) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, _, x_val, _ = digits(seed)
    x_train = to_tensor(x_train).view(len(x_train), -1)
    x_val = to_tensor(x_val).view(len(x_val), -1)
    mb_size, Z_dim, h_dim, lr = 64, 16, 128, 1e-3
    model = VAE(x_train.shape[1], h_dim, Z_dim)
    solver = torch.optim.Adam(model.parameters(), lr=lr)
    val_eps = torch.randn(len(x_val), Z_dim, generator=gen)
    kl_sign = -1.0 if bug == "kl-sign" else 1.0
    with tracelab.Recorder(run_dir, model=model, optimizer=solver,
                           config={"lr": lr, "mb_size": mb_size, "Z_dim": Z_dim,
                                   "h_dim": h_dim}) as rec:
        for it in range(iters):
            X = x_train[torch.randint(0, len(x_train), (mb_size,), generator=gen)]
            eps = torch.randn(mb_size, Z_dim, generator=gen)
            X_sample, z_mu, z_var = model(X, eps)
            loss = vae_loss(X_sample, X, z_mu, z_var, kl_sign)
            loss.backward()
            solver.step()
            if bug != "no-zero":  # housekeeping
                for p in model.parameters():
                    if p.grad is not None:
                        p.grad = torch.zeros_like(p.grad)
            rec.step(loss=loss, inputs=X, targets=X, outputs=X_sample)
            if it % 100 == 99:
                with torch.no_grad():
                    out, mu, var = model(x_val, val_eps)
                    rec.log("val", metrics={"loss": vae_loss(out, x_val, mu, var, kl_sign).item(),
                                            "recon": vae_loss(out, x_val, mu, var, 0.0).item()})
