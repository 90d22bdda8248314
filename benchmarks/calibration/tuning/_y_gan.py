"""Lornatang/GAN-PyTorch train.py with model.py and config.py, shrunk: the fully connected
Discriminator (LeakyReLU 0.2, Sigmoid output) and Generator (100-d noise, BatchNorm1d hidden
layers, LeakyReLU 0.2, Tanh output), nn.BCELoss() against torch.full real (1.0) and fake (0.0)
labels, two optim.Adam(lr=0.0002, betas=(0.5, 0.999)), discriminator.zero_grad() then the real and
the detached fake losses backpropagated separately and d_optimizer.step(), then
generator.zero_grad(), the generator loss against the real label and g_optimizer.step(); both
models in train() mode, batch 128. MNIST 28x28 is replaced by scikit-learn's 8x8 digits (so the
layers read 64 pixels instead of 784), transformed as the script (ToTensor() then
Normalize([0.5], [0.5])); 15 epochs. After each epoch the mean distance from each validation
digit to its nearest of 300 generated digits is logged as the val metric "nn_dist" (lower is
better; the generator in eval mode).

`bug` plants one fault (None: the script as published):
- "no-d-zero-grad": discriminator.zero_grad() left out, so the discriminator's gradients pile up
  across iterations.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.optim as optim

import tracelab
from _y_data import batches, digits, to_tensor

SOURCE = ("https://github.com/Lornatang/GAN-PyTorch/blob/"
          "347c69e01f311a1ba8c8a565e2f652ad264f5631/train.py")
BUGS = (None, "no-d-zero-grad")
PIXELS = 8 * 8


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Linear(1 * PIXELS, 512, bias=True), nn.LeakyReLU(0.2, True),
            nn.Linear(512, 256, bias=True), nn.LeakyReLU(0.2, True),
            nn.Linear(256, 1, bias=True), nn.Sigmoid())

    def forward(self, x):
        return self.main(torch.flatten(x, 1))


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Linear(100, 128, bias=True), nn.LeakyReLU(0.2, True),
            nn.Linear(128, 256, bias=False), nn.BatchNorm1d(256), nn.LeakyReLU(0.2, True),
            nn.Linear(256, 512, bias=False), nn.BatchNorm1d(512), nn.LeakyReLU(0.2, True),
            nn.Linear(512, 1024, bias=False), nn.BatchNorm1d(1024), nn.LeakyReLU(0.2, True),
            nn.Linear(1024, 1 * PIXELS, bias=True), nn.Tanh())

    def forward(self, x):
        out = self.main(x)
        return out.reshape(out.size(0), 1, 8, 8)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 15) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, _, x_val, _ = digits(seed)
    x_train = (to_tensor(x_train) - 0.5) / 0.5
    x_val = (to_tensor(x_val) - 0.5) / 0.5
    discriminator, generator = Discriminator(), Generator()
    criterion = nn.BCELoss()
    d_optimizer = optim.Adam(discriminator.parameters(), 0.0002, (0.5, 0.999))
    g_optimizer = optim.Adam(generator.parameters(), 0.0002, (0.5, 0.999))
    model = nn.ModuleDict({"generator": generator, "discriminator": discriminator})
    with tracelab.Recorder(run_dir, model=model, optimizer={"d": d_optimizer, "g": g_optimizer},
                           loss_fn=criterion,
                           config={"lr": 0.0002, "betas": (0.5, 0.999), "batch_size": 128,
                                   "epochs": epochs}) as rec:
        for _ in range(epochs):
            discriminator.train()
            generator.train()
            for idx in batches(len(x_train), 128, gen):
                real = x_train[idx]
                label_size = real.size(0)
                real_label = torch.full([label_size, 1], 1.0, dtype=real.dtype)
                fake_label = torch.full([label_size, 1], 0.0, dtype=real.dtype)
                noise = torch.randn([label_size, 100], generator=gen)
                if bug != "no-d-zero-grad":
                    discriminator.zero_grad()
                output = discriminator(real)
                d_loss_real = criterion(output, real_label)
                d_loss_real.backward()
                fake = generator(noise)
                output = discriminator(fake.detach())
                d_loss_fake = criterion(output, fake_label)
                d_loss_fake.backward()
                d_loss = d_loss_real + d_loss_fake
                d_optimizer.step()
                generator.zero_grad()
                output = discriminator(fake)
                g_loss = criterion(output, real_label)
                g_loss.backward()
                g_optimizer.step()
                rec.step(loss=g_loss, inputs=real, outputs=output, targets=real_label,
                         metrics={"d_loss": d_loss.item(), "g_loss": g_loss.item()})
            generator.eval()
            with torch.no_grad():
                samples = generator(torch.randn([300, 100], generator=gen)).flatten(1)
                dist = torch.cdist(x_val.flatten(1), samples).min(1).values.mean().item()
            rec.log("val", metrics={"nn_dist": dist})
