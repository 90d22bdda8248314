"""eriklindernoren/PyTorch-GAN, implementations/dcgan/dcgan.py: a generator of a linear layer,
BatchNorm, upsampling and convolutions, a conv discriminator with dropout and BatchNorm,
BCELoss, two Adam optimizers (lr 2e-4, betas 0.5/0.999), normal(0, 0.02) init; 8x8 digits in
[-1, 1], latent 16, 16 and 32 channels."""
from __future__ import annotations

import torch
from torch import nn

from _s_common import batches, digits, gan_step, recorder, setup, step


def weights_init_normal(m):
    if isinstance(m, nn.Conv2d):
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif isinstance(m, nn.BatchNorm2d):
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.constant_(m.bias, 0.0)


class Generator(nn.Module):
    def __init__(self, registered: bool):
        super().__init__()
        self.l1 = nn.Sequential(nn.Linear(16, 32 * 2 * 2))
        blocks = [nn.BatchNorm2d(32), nn.Upsample(scale_factor=2), nn.Conv2d(32, 32, 3, 1, 1),
                  nn.BatchNorm2d(32, 0.8), nn.LeakyReLU(0.2, inplace=True), nn.Upsample(scale_factor=2),
                  nn.Conv2d(32, 16, 3, 1, 1), nn.BatchNorm2d(16, 0.8), nn.LeakyReLU(0.2, inplace=True),
                  nn.Conv2d(16, 1, 3, 1, 1), nn.Tanh()]
        self.conv_blocks = nn.Sequential(*blocks) if registered else blocks

    def forward(self, z):
        out = self.l1(z).view(z.size(0), 32, 2, 2)
        if isinstance(self.conv_blocks, nn.Module):
            return self.conv_blocks(out)
        for layer in self.conv_blocks:
            out = layer(out)
        return out


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()

        def block(cin, cout, bn=True):
            layers = [nn.Conv2d(cin, cout, 3, 2, 1), nn.LeakyReLU(0.2, inplace=True), nn.Dropout2d(0.25)]
            if bn:
                layers.append(nn.BatchNorm2d(cout, 0.8))
            return layers

        self.model = nn.Sequential(*block(1, 16, bn=False), *block(16, 32))
        self.adv_layer = nn.Sequential(nn.Linear(32 * 2 * 2, 1), nn.Sigmoid())

    def forward(self, img):
        return self.adv_layer(self.model(img).flatten(1))


def train(run_dir: str, seed: int, *, registered: bool = True) -> None:
    g = setup(seed)
    xtr, _, _, _ = digits()
    xtr = xtr.view(-1, 1, 8, 8) / 8 - 1
    G, D = Generator(registered), Discriminator()
    G.apply(weights_init_normal)
    D.apply(weights_init_normal)
    if not registered:
        for layer in G.conv_blocks:
            weights_init_normal(layer)
    adversarial_loss = nn.BCELoss()
    optimizer_G = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optimizer_D = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    model = nn.ModuleDict({"generator": G, "discriminator": D})
    with recorder(run_dir, model, [optimizer_G, optimizer_D],
                  config={"lr": 2e-4, "b1": 0.5, "batch_size": 64, "latent_dim": 16},
                  loss_fn=adversarial_loss) as rec:
        for _ in range(6):
            for idx in batches(len(xtr), 64, g, drop_last=True):
                g_loss, d_loss, validity, valid = gan_step(
                    G, D, optimizer_G, optimizer_D, adversarial_loss, xtr[idx],
                    torch.randn(len(idx), 16, generator=g))
                step(rec, loss=g_loss, inputs=xtr[idx], targets=valid, outputs=validity,
                     metrics={"d_loss": d_loss})
