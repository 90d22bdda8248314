"""pytorch/examples dcgan/main.py, shrunk: its Generator (ConvTranspose2d, BatchNorm2d, ReLU,
Tanh) and Discriminator (Conv2d, BatchNorm2d, LeakyReLU(0.2), Sigmoid), weights_init, BCELoss,
Adam(lr=2e-4, betas=(0.5, 0.999)) for each network, and its loop: netD.zero_grad(), the real
and the detached fake batch, optimizerD.step(); netG.zero_grad(), the fake batch labelled real,
optimizerG.step(). Images are scikit-learn's 8x8 digits upsampled to 16x16 and normalized to
[-1, 1] (the script's Normalize((0.5,), (0.5,))), so each network has three layers instead of
five, nz 16, ngf = ndf = 16, 300 iterations of batch 64.

`bug` plants one fault (None: the script as published):
- "no-d-step": optimizerD.step() left out, so the discriminator's optimizer never steps (its
  grads are computed and zeroed every iteration).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import tracelab
from _a_data import batches, digits, to_tensor

SOURCE = ("https://github.com/pytorch/examples/blob/77f55b912142e11fcfdf5b530231fb9c52f181e8/"
          "dcgan/main.py")
BUGS = (None, "no-d-step")
NZ, NGF, NDF, NC = 16, 16, 16, 1


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(NZ, NGF * 4, 4, 1, 0, bias=False),
            nn.BatchNorm2d(NGF * 4),
            nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 4, NGF * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(NGF * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 2, NC, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(NC, NDF, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(NDF * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF * 2, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


def run(run_dir: str, seed: int = 0, bug: str | None = None, iters: int = 300) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, _, _, _ = digits(seed, n_val=0)
    images = F.interpolate(to_tensor(x_train), size=16, mode="bilinear", align_corners=False)
    images = (images - 0.5) / 0.5
    netG, netD = Generator(), Discriminator()
    netG.apply(weights_init)
    netD.apply(weights_init)
    criterion = nn.BCELoss()
    real_label, fake_label = 1.0, 0.0
    optimizerD = optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    model = nn.ModuleDict({"g": netG, "d": netD})
    with tracelab.Recorder(run_dir, model=model, optimizer={"g": optimizerG, "d": optimizerD},
                           loss_fn=criterion, config={"lr": 2e-4, "beta1": 0.5, "nz": NZ,
                                                      "batch_size": 64}) as rec:
        done = 0
        while done < iters:
            for idx in batches(len(images), 64, gen):
                real = images[idx]
                batch_size = real.size(0)
                netD.zero_grad()
                label = torch.full((batch_size,), real_label)
                output = netD(real)
                errD_real = criterion(output, label)
                errD_real.backward()
                noise = torch.randn(batch_size, NZ, 1, 1)
                fake = netG(noise)
                label.fill_(fake_label)
                output = netD(fake.detach())
                errD_fake = criterion(output, label)
                errD_fake.backward()
                errD = errD_real + errD_fake
                if bug != "no-d-step":
                    optimizerD.step()

                netG.zero_grad()
                label.fill_(real_label)
                output = netD(fake)
                errG = criterion(output, label)
                errG.backward()
                optimizerG.step()
                rec.step(loss=errG, inputs=real, outputs=output, targets=label,
                         metrics={"loss_d": errD, "d_fake": output.mean()})
                done += 1
                if done == iters:
                    break
