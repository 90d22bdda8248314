"""AntixK/PyTorch-VAE models/vanilla_vae.py with experiment.py and configs/vae.yaml, shrunk: the
VanillaVAE (stride-2 Conv2d + BatchNorm2d + LeakyReLU encoder, fc_mu / fc_var, reparameterize,
ConvTranspose2d + BatchNorm2d + LeakyReLU decoder, final layer ending in Tanh), its
loss_function (F.mse_loss reconstruction + kld_weight * KLD, kld_weight 0.00025; validation
uses the same weight where VAEXperiment passes M_N=1.0, so the val loss is the trained objective), Adam(lr=0.005, weight_decay=0.0) and
ExponentialLR(gamma=0.95) stepped once per epoch, as the Lightning Trainer does; the Trainer's
model.train() / model.eval() + no_grad are written out. The data is scikit-learn's 8x8 digits
through ToTensor() (0-1) with RandomHorizontalFlip on train and val as dataset.py has it, one
channel instead of CelebA's three; hidden_dims [32, 64] for [32 ... 512] so 8x8 halves to 2x2
as 64x64 does to 2x2; latent 16 for 128; 10 epochs of batch 64.

`bug` plants one fault (None: the script as published):
- "batch-4": train_batch_size 4, so every BatchNorm2d normalizes over 4 images (2 epochs:
  750 steps instead of 240);
- "wd-0.5": Adam(weight_decay=0.5);
- "sched-per-batch": scheduler.step() after every optimizer step instead of every epoch.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

import tracelab
from _d_data import batches, digits01

SOURCE = ("https://github.com/AntixK/PyTorch-VAE/blob/a6896b944c918dd7030e7d795a8c13e5c6345ec7/"
          "models/vanilla_vae.py")
BUGS = (None, "batch-4", "wd-0.5", "sched-per-batch")


class VanillaVAE(nn.Module):
    def __init__(self, in_channels: int, latent_dim: int, hidden_dims=None):
        super().__init__()
        self.latent_dim = latent_dim
        modules = []
        if hidden_dims is None:
            hidden_dims = [32, 64]
        self.last_dim = hidden_dims[-1]
        for h_dim in hidden_dims:
            modules.append(nn.Sequential(
                nn.Conv2d(in_channels, out_channels=h_dim, kernel_size=3, stride=2, padding=1),
                nn.BatchNorm2d(h_dim),
                nn.LeakyReLU()))
            in_channels = h_dim
        self.encoder = nn.Sequential(*modules)
        self.fc_mu = nn.Linear(hidden_dims[-1] * 4, latent_dim)
        self.fc_var = nn.Linear(hidden_dims[-1] * 4, latent_dim)
        modules = []
        self.decoder_input = nn.Linear(latent_dim, hidden_dims[-1] * 4)
        hidden_dims = list(reversed(hidden_dims))
        for i in range(len(hidden_dims) - 1):
            modules.append(nn.Sequential(
                nn.ConvTranspose2d(hidden_dims[i], hidden_dims[i + 1], kernel_size=3, stride=2,
                                   padding=1, output_padding=1),
                nn.BatchNorm2d(hidden_dims[i + 1]),
                nn.LeakyReLU()))
        self.decoder = nn.Sequential(*modules)
        self.final_layer = nn.Sequential(
            nn.ConvTranspose2d(hidden_dims[-1], hidden_dims[-1], kernel_size=3, stride=2,
                               padding=1, output_padding=1),
            nn.BatchNorm2d(hidden_dims[-1]),
            nn.LeakyReLU(),
            nn.Conv2d(hidden_dims[-1], out_channels=1, kernel_size=3, padding=1),
            nn.Tanh())

    def encode(self, input):
        result = torch.flatten(self.encoder(input), start_dim=1)
        return [self.fc_mu(result), self.fc_var(result)]

    def decode(self, z):
        result = self.decoder_input(z).view(-1, self.last_dim, 2, 2)
        return self.final_layer(self.decoder(result))

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return eps * std + mu

    def forward(self, input):
        mu, log_var = self.encode(input)
        z = self.reparameterize(mu, log_var)
        return [self.decode(z), input, mu, log_var]

    def loss_function(self, *args, M_N):
        recons, input, mu, log_var = args
        recons_loss = F.mse_loss(recons, input)
        kld_loss = torch.mean(-0.5 * torch.sum(1 + log_var - mu ** 2 - log_var.exp(), dim=1),
                              dim=0)
        loss = recons_loss + M_N * kld_loss
        return {"loss": loss, "Reconstruction_Loss": recons_loss.detach(),
                "KLD": -kld_loss.detach()}


def _flip(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """RandomHorizontalFlip(p=0.5) per image."""
    flip = torch.rand(len(x), generator=gen) < 0.5
    return torch.where(flip[:, None, None, None], x.flip(3), x)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 10) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, _, x_val, _ = digits01(seed)
    model = VanillaVAE(1, 16)
    batch_size = 4 if bug == "batch-4" else 64
    kld_weight = 0.00025
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005,
                                 weight_decay=0.5 if bug == "wd-0.5" else 0.0)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.95)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer, scheduler=scheduler,
                           config={"LR": 0.005, "scheduler_gamma": 0.95,
                                   "kld_weight": kld_weight, "batch_size": batch_size}) as rec:
        for _ in range(2 if bug == "batch-4" else epochs):
            model.train()
            for idx in batches(len(x_train), batch_size, gen):
                real_img = _flip(x_train[idx], gen)
                results = model(real_img)
                train_loss = model.loss_function(*results, M_N=kld_weight)
                optimizer.zero_grad()
                train_loss["loss"].backward()
                optimizer.step()
                if bug == "sched-per-batch":
                    scheduler.step()
                rec.step(loss=train_loss["loss"], inputs=real_img, targets=real_img,
                         outputs=results[0],
                         metrics={"Reconstruction_Loss": train_loss["Reconstruction_Loss"],
                                  "KLD": train_loss["KLD"]})
            model.eval()
            with torch.no_grad():
                val_img = _flip(x_val, gen)
                results = model(val_img)
                val_loss = model.loss_function(*results, M_N=kld_weight)
            rec.log("val", metrics={"loss": float(val_loss["loss"]),
                                    "Reconstruction_Loss": float(val_loss["Reconstruction_Loss"])},
                    inputs=val_img, targets=val_img, outputs=results[0])
            if bug != "sched-per-batch":
                scheduler.step()
