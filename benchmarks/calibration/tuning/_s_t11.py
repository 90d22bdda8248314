"""eriklindernoren/PyTorch-GAN, implementations/gan/gan.py: an MLP generator (BatchNorm,
LeakyReLU, Tanh) and an MLP discriminator with a sigmoid, BCELoss, two Adam optimizers (lr 2e-4,
betas 0.5/0.999); the 8x8 digits scaled to [-1, 1], latent 16, widths 64 and 128."""
from __future__ import annotations

import torch
from torch import nn

from _s_common import batches, digits, gan_step, recorder, setup, step


def generator(latent: int) -> nn.Sequential:
    def block(cin, cout, normalize=True):
        layers = [nn.Linear(cin, cout)]
        if normalize:
            layers.append(nn.BatchNorm1d(cout, 0.8))
        layers.append(nn.LeakyReLU(0.2, inplace=True))
        return layers

    return nn.Sequential(*block(latent, 64, normalize=False), *block(64, 128), nn.Linear(128, 64), nn.Tanh())


def discriminator() -> nn.Sequential:
    return nn.Sequential(nn.Linear(64, 128), nn.LeakyReLU(0.2, inplace=True), nn.Linear(128, 64),
                         nn.LeakyReLU(0.2, inplace=True), nn.Linear(64, 1), nn.Sigmoid())


def train(run_dir: str, seed: int, *, swap_generator_labels: bool = False) -> None:
    g = setup(seed)
    xtr, _, _, _ = digits()
    xtr = xtr / 8 - 1
    G, D = generator(16), discriminator()
    adversarial_loss = nn.BCELoss()
    optimizer_G = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optimizer_D = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    model = nn.ModuleDict({"generator": G, "discriminator": D})
    with recorder(run_dir, model, {"generator": optimizer_G, "discriminator": optimizer_D},
                  config={"lr": 2e-4, "b1": 0.5, "batch_size": 64, "latent_dim": 16},
                  loss_fn=adversarial_loss) as rec:
        for _ in range(12):
            for idx in batches(len(xtr), 64, g, drop_last=True):
                g_loss, d_loss, validity, valid = gan_step(
                    G, D, optimizer_G, optimizer_D, adversarial_loss, xtr[idx],
                    torch.randn(len(idx), 16, generator=g), g_target_real=not swap_generator_labels)
                step(rec, loss=g_loss, inputs=xtr[idx], targets=valid, outputs=validity,
                     metrics={"d_loss": d_loss})
