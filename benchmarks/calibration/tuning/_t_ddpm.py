"""cloneofsimo/minDiffusion superminddpm.py, shrunk: ddpm_schedules(1e-4, 0.02, T), the
DummyEpsModel (blocks of Conv2d(7x7, padding 3) + BatchNorm2d + LeakyReLU, then a 3x3
convolution back to the image's channels), DDPM.forward (a random t per image, x_t =
sqrt(alphabar) x + sqrt(1 - alphabar) eps, MSELoss between eps and the model's guess), Adam(lr=
2e-4), ddpm.train() at the top of each epoch and ddpm.eval() after it, batch 128. The data is
scikit-learn's 8x8 digits through ToTensor() + Normalize((0.5,), (1.0)); the blocks' widths
64-128-256-512-256-128-64 become 8-16-32-16-8, T=1000 stays, 100 epochs become 10. After each
epoch the eval-mode model's denoising loss on 256 held-out digits (fixed t and noise) is logged
as the validation loss (the script samples 16 images there instead).

`bug` plants one fault (None: the script as published):
- "batch-2": the DataLoader's batch_size=2 (BatchNorm normalizes over two images), with
  the same number of steps;
- "raw-pixels": the transform left out: the uint8 pixels go in as 0-255 floats.
"""
from __future__ import annotations

import torch
import torch.nn as nn

import tracelab
from _t_data import digits, to_tensor

SOURCE = ("https://github.com/cloneofsimo/minDiffusion/blob/"
          "00a3c8066d25a34d3d472ef6c87c7b6b238ea444/superminddpm.py")
BUGS = (None, "batch-2", "raw-pixels")


def ddpm_schedules(beta1: float, beta2: float, T: int) -> dict[str, torch.Tensor]:
    beta_t = (beta2 - beta1) * torch.arange(0, T + 1, dtype=torch.float32) / T + beta1
    alpha_t = 1 - beta_t
    alphabar_t = torch.cumsum(torch.log(alpha_t), dim=0).exp()
    return {"sqrtab": torch.sqrt(alphabar_t), "sqrtmab": torch.sqrt(1 - alphabar_t)}


def blk(ic, oc):
    return nn.Sequential(nn.Conv2d(ic, oc, 7, padding=3), nn.BatchNorm2d(oc), nn.LeakyReLU())


class DummyEpsModel(nn.Module):
    def __init__(self, n_channel: int) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            blk(n_channel, 8), blk(8, 16), blk(16, 32), blk(32, 16), blk(16, 8),
            nn.Conv2d(8, n_channel, 3, padding=1))

    def forward(self, x, t) -> torch.Tensor:
        return self.conv(x)


class DDPM(nn.Module):
    def __init__(self, eps_model, betas, n_T, criterion=None):
        super().__init__()
        self.eps_model = eps_model
        for k, v in ddpm_schedules(betas[0], betas[1], n_T).items():
            self.register_buffer(k, v)
        self.n_T = n_T
        self.criterion = criterion or nn.MSELoss()

    def noised(self, x, _ts, eps):
        return self.sqrtab[_ts, None, None, None] * x + self.sqrtmab[_ts, None, None, None] * eps

    def forward(self, x, _ts, eps):
        pred = self.eps_model(self.noised(x, _ts, eps), _ts / self.n_T)
        return self.criterion(eps, pred), pred


def run(run_dir: str, seed: int = 0, bug: str | None = None, n_epoch: int = 10) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, _, x_val, _ = digits(seed, n_val=256)
    if bug == "raw-pixels":
        tf = lambda im: im.float()
    else:
        tf = lambda im: (to_tensor(im) - 0.5) / 1.0
    x_train, x_val = tf(x_train), tf(x_val)
    criterion = nn.MSELoss()
    ddpm = DDPM(DummyEpsModel(1), betas=(1e-4, 0.02), n_T=1000, criterion=criterion)
    optim = torch.optim.Adam(ddpm.parameters(), lr=2e-4)
    val_t = torch.randint(1, 1000, (len(x_val),), generator=gen)
    val_eps = torch.randn(x_val.shape, generator=gen)
    batch_size = 2 if bug == "batch-2" else 128
    steps_per_epoch = -(-len(x_train) // 128)
    with tracelab.Recorder(run_dir, model=ddpm, optimizer=optim, loss_fn=criterion,
                           config={"lr": 2e-4, "batch_size": batch_size, "n_T": 1000}) as rec:
        for _ in range(n_epoch):
            ddpm.train()
            order = torch.randperm(len(x_train), generator=gen)
            for b in range(steps_per_epoch):
                x = x_train[order[b * batch_size:(b + 1) * batch_size]]
                if len(x) == 0:
                    break
                optim.zero_grad()
                _ts = torch.randint(1, 1000, (x.shape[0],), generator=gen)
                eps = torch.randn(x.shape, generator=gen)
                loss, pred = ddpm(x, _ts, eps)
                loss.backward()
                optim.step()
                rec.step(loss=loss, inputs=x, targets=eps, outputs=pred)
            ddpm.eval()
            with torch.no_grad():
                val_loss, pred = ddpm(x_val, val_t, val_eps)
            rec.log("val", metrics={"loss": val_loss.item()}, inputs=x_val, targets=val_eps,
                    outputs=pred)
