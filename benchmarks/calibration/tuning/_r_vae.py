"""sksq96/pytorch-vae vae-cnn.ipynb, shrunk: its convolutional VAE (four stride-2 4x4
convolutions, Flatten, fc1/fc2 to mu and logvar, reparameterize, fc3, UnFlatten, four transposed
convolutions, Sigmoid), loss_fn = binary_cross_entropy summed + KLD (-0.5 * mean(...)),
Adam(lr=1e-3), bs = 32, ToTensor() images. Channels 32-64-128-256 -> 8-16-32-64 (h_dim 1024 ->
256), z_dim 32 -> 8, one channel; the data is scikit-learn's digits upsampled to 64x64 in place
of the CarRacing rollouts. A held-out batch is scored after each epoch.

`bug` plants one fault (None: the notebook as published):
- "logits-loss": the reconstruction term computed with F.binary_cross_entropy_with_logits on
  the decoder's Sigmoid output, a second sigmoid squeezing every pixel into [0.5, 0.73];
- "other-instance": the optimizer built over the parameters of another VAE instance (the
  notebook itself names its model `model` and builds Adam(vae.parameters())), so the trained
  model's optimizer steps never touch it.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab
from _r_data import batches, digits, to_tensor

SOURCE = ("https://github.com/sksq96/pytorch-vae/blob/14ce22796fe0ee5120f4f1cdb1dbaf515e72559d/"
          "vae-cnn.ipynb")
BUGS = (None, "logits-loss", "other-instance")


class Flatten(nn.Module):
    def forward(self, input):
        return input.view(input.size(0), -1)


class UnFlatten(nn.Module):
    def forward(self, input, size=256):
        return input.view(input.size(0), size, 1, 1)


class VAE(nn.Module):
    def __init__(self, image_channels=1, h_dim=256, z_dim=8):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(image_channels, 8, kernel_size=4, stride=2),
            nn.ReLU(),
            nn.Conv2d(8, 16, kernel_size=4, stride=2),
            nn.ReLU(),
            nn.Conv2d(16, 32, kernel_size=4, stride=2),
            nn.ReLU(),
            nn.Conv2d(32, 64, kernel_size=4, stride=2),
            nn.ReLU(),
            Flatten()
        )
        self.fc1 = nn.Linear(h_dim, z_dim)
        self.fc2 = nn.Linear(h_dim, z_dim)
        self.fc3 = nn.Linear(z_dim, h_dim)
        self.decoder = nn.Sequential(
            UnFlatten(),
            nn.ConvTranspose2d(h_dim, 32, kernel_size=5, stride=2),
            nn.ReLU(),
            nn.ConvTranspose2d(32, 16, kernel_size=5, stride=2),
            nn.ReLU(),
            nn.ConvTranspose2d(16, 8, kernel_size=6, stride=2),
            nn.ReLU(),
            nn.ConvTranspose2d(8, image_channels, kernel_size=6, stride=2),
            nn.Sigmoid(),
        )

    def reparameterize(self, mu, logvar):
        std = logvar.mul(0.5).exp_()
        esp = torch.randn(*mu.size())
        return mu + std * esp

    def bottleneck(self, h):
        mu, logvar = self.fc1(h), self.fc2(h)
        z = self.reparameterize(mu, logvar)
        return z, mu, logvar

    def encode(self, x):
        h = self.encoder(x)
        return self.bottleneck(h)

    def decode(self, z):
        return self.decoder(self.fc3(z))

    def forward(self, x):
        z, mu, logvar = self.encode(x)
        return self.decode(z), mu, logvar


def loss_fn(recon_x, x, mu, logvar, bug=None):
    if bug == "logits-loss":
        BCE = F.binary_cross_entropy_with_logits(recon_x, x, reduction="sum")
    else:
        BCE = F.binary_cross_entropy(recon_x, x, reduction="sum")
    KLD = -0.5 * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD, BCE, KLD


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 6) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, _, x_val, _ = digits(seed, n_val=128, size=64)
    x_train, x_val = to_tensor(x_train[:960]), to_tensor(x_val)
    vae = VAE(image_channels=1)
    stale = VAE(image_channels=1) if bug == "other-instance" else vae
    optimizer = torch.optim.Adam(stale.parameters(), lr=1e-3)
    with tracelab.Recorder(run_dir, model=vae, optimizer=optimizer,
                           config={"lr": 1e-3, "bs": 32, "z_dim": 8}) as rec:
        for _ in range(epochs):
            vae.train()
            for idx in batches(len(x_train), 32, gen):
                images = x_train[idx]
                recon_images, mu, logvar = vae(images)
                loss, bce, kld = loss_fn(recon_images, images, mu, logvar, bug)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=images, targets=images, outputs=recon_images,
                         metrics={"bce": bce, "kld": kld})
            vae.eval()
            with torch.no_grad():
                recon, mu, logvar = vae(x_val)
                loss, bce, kld = loss_fn(recon, x_val, mu, logvar, bug)
                mse = F.mse_loss(recon, x_val).item()
            rec.log("val", metrics={"loss": loss.item() / len(x_val), "bce": bce.item() / len(x_val),
                                    "mse": mse},
                    inputs=x_val, targets=x_val, outputs=recon)
