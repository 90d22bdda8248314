"""1Konny/Beta-VAE solver.py + model.py, shrunk: BetaVAE_H (convolutional encoder to 2*z_dim,
reparametrize, transposed-convolution decoder, kaiming init), the bernoulli decoder's
reconstruction loss binary_cross_entropy_with_logits(size_average=False).div(batch_size), the
KL term summed over z and averaged over the batch, objective H (recon + beta * kld, beta=4), Adam
(lr 1e-4, betas 0.9/0.999). The data is scikit-learn's 8x8 digits in 0-1 (dSprites stand-in), so
the encoder has three convolutions (8 -> 4 -> 2 -> 1) and the decoder mirrors them; z_dim 10,
batch 64; lr raised to 1e-3 so a few hundred steps show the fall; beta 0.5, as with 64
pixels instead of 4096 the script's beta=4 collapses the posterior (KL near 0).

`bug` plants one fault (None: the script as published):
- "sigmoid-logits": the decoder ends in a sigmoid, and its probabilities are read by
  binary_cross_entropy_with_logits as logits;
- "lr-high": Adam's lr set to 0.05 (50 times the run's 1e-3); the loss stays at the
  constant of a decoder that ignores z.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.init as init
import torch.optim as optim

import tracelab
from _z_data import batches, digits

SOURCE = ("https://github.com/1Konny/Beta-VAE/blob/977a1ece88e190dd8a556b4e2efb665f759d0772/"
          "solver.py")
BUGS = (None, "sigmoid-logits", "lr-high")


def reparametrize(mu, logvar):
    std = logvar.div(2).exp()
    eps = torch.randn_like(std)
    return mu + std * eps


class View(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.size = size

    def forward(self, tensor):
        return tensor.view(self.size)


def kaiming_init(m):
    if isinstance(m, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d)):
        init.kaiming_normal_(m.weight)
        if m.bias is not None:
            m.bias.data.fill_(0)


class BetaVAE_H(nn.Module):
    def __init__(self, z_dim=10, nc=1, sigmoid_out=False):
        super().__init__()
        self.z_dim = z_dim
        self.encoder = nn.Sequential(
            nn.Conv2d(nc, 32, 4, 2, 1), nn.ReLU(True),      # B, 32, 4, 4
            nn.Conv2d(32, 64, 4, 2, 1), nn.ReLU(True),      # B, 64, 2, 2
            nn.Conv2d(64, 256, 2, 1), nn.ReLU(True),        # B, 256, 1, 1
            View((-1, 256)),
            nn.Linear(256, z_dim * 2),
        )
        layers = [
            nn.Linear(z_dim, 256), View((-1, 256, 1, 1)), nn.ReLU(True),
            nn.ConvTranspose2d(256, 64, 2), nn.ReLU(True),            # B, 64, 2, 2
            nn.ConvTranspose2d(64, 32, 4, 2, 1), nn.ReLU(True),       # B, 32, 4, 4
            nn.ConvTranspose2d(32, nc, 4, 2, 1),                      # B, nc, 8, 8
        ]
        if sigmoid_out:
            layers.append(nn.Sigmoid())
        self.decoder = nn.Sequential(*layers)
        for block in self._modules:
            for m in self._modules[block]:
                kaiming_init(m)

    def forward(self, x):
        distributions = self.encoder(x)
        mu = distributions[:, :self.z_dim]
        logvar = distributions[:, self.z_dim:]
        z = reparametrize(mu, logvar)
        return self.decoder(z), mu, logvar


def reconstruction_loss(x, x_recon):
    batch_size = x.size(0)
    return F.binary_cross_entropy_with_logits(x_recon, x, reduction="sum").div(batch_size)


def kl_divergence(mu, logvar):
    klds = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp())
    return klds.sum(1).mean(0, True)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 12) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, _, x_val, _ = digits(seed)
    beta, lr = 0.5, (0.05 if bug == "lr-high" else 1e-3)
    net = BetaVAE_H(10, 1, sigmoid_out=bug == "sigmoid-logits")
    opt = optim.Adam(net.parameters(), lr=lr, betas=(0.9, 0.999))
    with tracelab.Recorder(run_dir, model=net, optimizer=opt,
                           loss_fn=nn.BCEWithLogitsLoss(reduction="sum"),
                           config={"lr": lr, "beta": beta, "z_dim": 10, "batch_size": 64,
                                   "objective": "H"}) as rec:
        net.train()
        for _ in range(epochs):
            for idx in batches(len(x_train), 64, gen):
                x = x_train[idx]
                x_recon, mu, logvar = net(x)
                recon_loss = reconstruction_loss(x, x_recon)
                total_kld = kl_divergence(mu, logvar)
                beta_vae_loss = recon_loss + beta * total_kld
                opt.zero_grad()
                beta_vae_loss.backward()
                opt.step()
                rec.step(loss=beta_vae_loss, inputs=x, targets=x, outputs=x_recon)
            net.eval()
            with torch.no_grad():
                x_recon, mu, logvar = net(x_val)
                val = (reconstruction_loss(x_val, x_recon) + beta * kl_divergence(mu, logvar))
            rec.log("val", metrics={"loss": float(val)}, inputs=x_val, targets=x_val,
                    outputs=x_recon)
            net.train()
