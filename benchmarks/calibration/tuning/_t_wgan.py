"""martinarjovsky/WassersteinGAN main.py with --mlp_G --mlp_D (models/mlp.py), shrunk: MLP_G
(nz -> ngf x3 with ReLU -> image, no output squashing) and MLP_D (image -> ndf x3 with ReLU
-> 1, averaged over the batch), RMSprop(lr=5e-5) for both, the critic's weights clamped to
[-0.01, 0.01] before each critic step, Diters=5 critic steps per generator step (100 for the
first 25 generator steps, and every 500th), errD_real.backward(one), errD_fake.backward(mone),
errG.backward(one) and netD's requires_grad switched off for the generator step. The data is
scikit-learn's 8x8 digits (nc=1, isize=8) through ToTensor() + Normalize((0.5,), (0.5,)), nz=16,
ngf=ndf=64, batch 64; 25 epochs become 200 generator steps and the first steps' 100 critic
iterations 25. Every 20 generator steps a validation entry scores 256 fresh samples: the
Frechet distance of their pixels to the real images' (mean and covariance), as a sample
quality figure that falls when the generator learns, and their per-pixel spread.

`bug` plants one fault (None: the script as published):
- "high-lr": lrD = lrG = 5e-3, a hundred times the script's default;
- "adam": healthy, the script's --adam option (Adam(lr=5e-5, betas=(0.5, 0.999)) for both);
- "zero-noise": the noise buffer allocated but its normal_(0, 1) left out, so the generator's
  input is the same all-zero vector in every row of every batch.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
from scipy import linalg

import tracelab
from _t_data import digits, to_tensor

SOURCE = ("https://github.com/martinarjovsky/WassersteinGAN/blob/"
          "f7a01e82007ea408647c451b9e1c8f1932a3db67/main.py")
BUGS = (None, "high-lr", "adam", "zero-noise")


class MLP_G(nn.Module):
    def __init__(self, isize, nz, nc, ngf):
        super().__init__()
        self.main = nn.Sequential(
            nn.Linear(nz, ngf), nn.ReLU(True),
            nn.Linear(ngf, ngf), nn.ReLU(True),
            nn.Linear(ngf, ngf), nn.ReLU(True),
            nn.Linear(ngf, nc * isize * isize))
        self.nc, self.isize = nc, isize

    def forward(self, input):
        output = self.main(input.view(input.size(0), input.size(1)))
        return output.view(output.size(0), self.nc, self.isize, self.isize)


class MLP_D(nn.Module):
    def __init__(self, isize, nc, ndf):
        super().__init__()
        self.main = nn.Sequential(
            nn.Linear(nc * isize * isize, ndf), nn.ReLU(True),
            nn.Linear(ndf, ndf), nn.ReLU(True),
            nn.Linear(ndf, ndf), nn.ReLU(True),
            nn.Linear(ndf, 1))

    def forward(self, input):
        output = self.main(input.view(input.size(0), -1))
        return output.mean(0).view(1)


def frechet(a: np.ndarray, b: np.ndarray) -> float:
    mu_a, mu_b = a.mean(0), b.mean(0)
    eye = 1e-6 * np.eye(a.shape[1])
    cov_a, cov_b = np.cov(a, rowvar=False) + eye, np.cov(b, rowvar=False) + eye
    covmean = linalg.sqrtm(cov_a @ cov_b).real
    return float(((mu_a - mu_b) ** 2).sum() + np.trace(cov_a + cov_b - 2 * covmean))


def run(run_dir: str, seed: int = 0, bug: str | None = None, g_iters: int = 200) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    images, _, _, _ = digits(seed, n_val=0)
    data = (to_tensor(images) - 0.5) / 0.5
    real_flat = data.view(len(data), -1).numpy().astype(np.float64)
    nz, batch_size, diters = 16, 64, 5
    lr = 5e-3 if bug == "high-lr" else 5e-5
    netG, netD = MLP_G(8, nz, 1, 64), MLP_D(8, 1, 64)
    if bug == "adam":
        optimizerD = torch.optim.Adam(netD.parameters(), lr=lr, betas=(0.5, 0.999))
        optimizerG = torch.optim.Adam(netG.parameters(), lr=lr, betas=(0.5, 0.999))
    else:
        optimizerD = torch.optim.RMSprop(netD.parameters(), lr=lr)
        optimizerG = torch.optim.RMSprop(netG.parameters(), lr=lr)
    one = torch.ones(1)
    mone = one * -1
    model = nn.ModuleDict({"G": netG, "D": netD})
    fixed = torch.randn(256, nz, generator=gen)

    def draw(n):  # noise.resize_(n, nz, 1, 1).normal_(0, 1)
        if bug == "zero-noise":
            return torch.zeros(n, nz)
        return torch.randn(n, nz, generator=gen)
    with tracelab.Recorder(run_dir, model=model, optimizer={"G": optimizerG, "D": optimizerD},
                           config={"lrD": lr, "lrG": lr, "clamp": 0.01, "Diters": diters,
                                   "batchSize": batch_size, "nz": nz}) as rec:
        order = torch.randperm(len(data), generator=gen)
        pos = 0
        for gen_iterations in range(g_iters):
            for p in netD.parameters():
                p.requires_grad = True
            n_d = 25 if gen_iterations < 25 or gen_iterations % 500 == 0 else diters
            for _ in range(n_d):
                for p in netD.parameters():
                    p.data.clamp_(-0.01, 0.01)
                if pos + batch_size > len(data):
                    order, pos = torch.randperm(len(data), generator=gen), 0
                real = data[order[pos:pos + batch_size]]
                pos += batch_size
                netD.zero_grad()
                errD_real = netD(real)
                errD_real.backward(one)
                noise = draw(batch_size)
                with torch.no_grad():
                    fake = netG(noise)
                errD_fake = netD(fake)
                errD_fake.backward(mone)
                errD = errD_real - errD_fake
                optimizerD.step()
            for p in netD.parameters():
                p.requires_grad = False
            netG.zero_grad()
            noise = draw(batch_size)
            fake = netG(noise)
            errG = netD(fake)
            errG.backward(one)
            optimizerG.step()
            rec.step(loss=errG, inputs=noise,
                     metrics={"errD": errD.item(), "errD_real": errD_real.item(),
                              "errD_fake": errD_fake.item()})
            if gen_iterations % 20 == 19:
                with torch.no_grad():
                    samples = netG(fixed).view(256, -1).numpy().astype(np.float64)
                rec.log("val", metrics={"frechet": frechet(samples, real_flat),
                                        "sample_std": float(samples.std(0).mean())})
