"""lucidrains/denoising-diffusion-pytorch denoising_diffusion_pytorch_1d.py (GaussianDiffusion1D,
Unet1D, Trainer1D), shrunk: GaussianDiffusion1D with the cosine beta schedule, objective
'pred_noise', q_sample of x0 normalized to [-1, 1], and the per-sample mean of the l2 loss
(p_losses); a Unet1D of ResnetBlocks (weight-standardized convolutions, GroupNorm, SiLU, a
sinusoidal time embedding scaling and shifting each block) with one down- and one up-sampling
stage and skip connections (linear attention and the mid attention left out); Trainer1D's Adam
(lr 8e-5 -> 1e-3, betas (0.9, 0.99)), clip_grad_norm_(max_grad_norm=1.) and the EMA of the
model (beta 0.995, updated every step, kept out of the optimizer). dim 64 -> 16, dim_mults
(1, 2, 4, 8) -> (1, 2), timesteps 1000 -> 200, seq_length 128 -> 32, one channel; the data are
synthetic signals (random sums of two sines in [0, 1]), batch 32. Every 50 steps the EMA model's
denoising loss on a fixed held-out batch at fixed timesteps is logged.

`bug` is None: the script as published (healthy only).
"""
from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

import tracelab

SOURCE = ("https://github.com/lucidrains/denoising-diffusion-pytorch/blob/"
          "d9b4a286c25ecba2ca1d747782312fc5e3beb42d/denoising_diffusion_pytorch/"
          "denoising_diffusion_pytorch_1d.py")
BUGS = (None,)


class WeightStandardizedConv1d(nn.Conv1d):
    def forward(self, x):
        eps = 1e-5
        weight = self.weight
        mean = weight.mean(dim=(1, 2), keepdim=True)
        var = weight.var(dim=(1, 2), keepdim=True, unbiased=False)
        normalized_weight = (weight - mean) * (var + eps).rsqrt()
        return F.conv1d(x, normalized_weight, self.bias, self.stride, self.padding)


class SinusoidalPosEmb(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        half_dim = self.dim // 2
        emb = math.log(10000) / (half_dim - 1)
        emb = torch.exp(torch.arange(half_dim) * -emb)
        emb = x[:, None] * emb[None, :]
        return torch.cat((emb.sin(), emb.cos()), dim=-1)


class Block(nn.Module):
    def __init__(self, dim, dim_out, groups=8):
        super().__init__()
        self.proj = WeightStandardizedConv1d(dim, dim_out, 3, padding=1)
        self.norm = nn.GroupNorm(groups, dim_out)
        self.act = nn.SiLU()

    def forward(self, x, scale_shift=None):
        x = self.norm(self.proj(x))
        if scale_shift is not None:
            scale, shift = scale_shift
            x = x * (scale + 1) + shift
        return self.act(x)


class ResnetBlock(nn.Module):
    def __init__(self, dim, dim_out, time_emb_dim, groups=8):
        super().__init__()
        self.mlp = nn.Sequential(nn.SiLU(), nn.Linear(time_emb_dim, dim_out * 2))
        self.block1 = Block(dim, dim_out, groups=groups)
        self.block2 = Block(dim_out, dim_out, groups=groups)
        self.res_conv = nn.Conv1d(dim, dim_out, 1) if dim != dim_out else nn.Identity()

    def forward(self, x, time_emb):
        scale_shift = self.mlp(time_emb)[:, :, None].chunk(2, dim=1)
        h = self.block1(x, scale_shift=scale_shift)
        h = self.block2(h)
        return h + self.res_conv(x)


class Unet1D(nn.Module):
    def __init__(self, dim=16, channels=1):
        super().__init__()
        time_dim = dim * 4
        self.init_conv = nn.Conv1d(channels, dim, 7, padding=3)
        self.time_mlp = nn.Sequential(SinusoidalPosEmb(dim), nn.Linear(dim, time_dim), nn.GELU(),
                                      nn.Linear(time_dim, time_dim))
        self.down1 = ResnetBlock(dim, dim, time_dim)
        self.downsample = nn.Conv1d(dim, dim * 2, 4, 2, 1)
        self.mid = ResnetBlock(dim * 2, dim * 2, time_dim)
        self.upsample = nn.Sequential(nn.Upsample(scale_factor=2, mode='nearest'),
                                      nn.Conv1d(dim * 2, dim, 3, padding=1))
        self.up1 = ResnetBlock(dim * 2, dim, time_dim)
        self.final_res_block = ResnetBlock(dim * 2, dim, time_dim)
        self.final_conv = nn.Conv1d(dim, channels, 1)

    def forward(self, x, time):
        x = self.init_conv(x)
        r = x.clone()
        t = self.time_mlp(time)
        h = self.down1(x, t)
        x = self.mid(self.downsample(h), t)
        x = self.upsample(x)
        x = self.up1(torch.cat((x, h), dim=1), t)
        x = self.final_res_block(torch.cat((x, r), dim=1), t)
        return self.final_conv(x)


def cosine_beta_schedule(timesteps, s=0.008):
    steps = timesteps + 1
    x = torch.linspace(0, timesteps, steps, dtype=torch.float64)
    alphas_cumprod = torch.cos(((x / timesteps) + s) / (1 + s) * math.pi * 0.5) ** 2
    alphas_cumprod = alphas_cumprod / alphas_cumprod[0]
    betas = 1 - (alphas_cumprod[1:] / alphas_cumprod[:-1])
    return torch.clip(betas, 0, 0.999)


class GaussianDiffusion1D(nn.Module):
    def __init__(self, model, seq_length, timesteps=200):
        super().__init__()
        self.model, self.seq_length, self.num_timesteps = model, seq_length, timesteps
        alphas_cumprod = torch.cumprod(1. - cosine_beta_schedule(timesteps), dim=0)
        self.register_buffer('sqrt_alphas_cumprod', torch.sqrt(alphas_cumprod).float())
        self.register_buffer('sqrt_one_minus_alphas_cumprod', torch.sqrt(1. - alphas_cumprod).float())

    def q_sample(self, x_start, t, noise):
        return (self.sqrt_alphas_cumprod[t][:, None, None] * x_start +
                self.sqrt_one_minus_alphas_cumprod[t][:, None, None] * noise)

    def p_losses(self, x_start, t, noise):
        x = self.q_sample(x_start=x_start, t=t, noise=noise)
        model_out = self.model(x, t.float())
        loss = F.mse_loss(model_out, noise, reduction='none')
        loss = loss.mean(dim=(1, 2))
        return loss.mean(), x, model_out

    def forward(self, img, generator):
        b = img.shape[0]
        t = torch.randint(0, self.num_timesteps, (b,), generator=generator).long()
        noise = torch.randn(img.shape, generator=generator)
        img = img * 2 - 1  # normalize_to_neg_one_to_one
        return self.p_losses(img, t, noise)


def signals(generator: torch.Generator, n: int, length: int = 32) -> torch.Tensor:
    x = torch.linspace(0, 2 * math.pi, length)
    f = torch.randint(1, 4, (n, 2), generator=generator).float()
    ph = torch.rand(n, 2, generator=generator) * 2 * math.pi
    s = (torch.sin(f[:, :1] * x + ph[:, :1]) + 0.5 * torch.sin(f[:, 1:] * x + ph[:, 1:])) / 1.5
    return ((s + 1) / 2)[:, None, :]


def run(run_dir: str, seed: int = 0, bug: str | None = None, train_num_steps: int = 300) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    data = signals(gen, 2048)
    held_out = signals(torch.Generator().manual_seed(seed + 1), 64)
    fixed_t = torch.arange(64) * 3 % 200
    fixed_noise = torch.randn(held_out.shape, generator=torch.Generator().manual_seed(seed + 2))
    diffusion = GaussianDiffusion1D(Unet1D(dim=16), seq_length=32, timesteps=200)
    ema = copy.deepcopy(diffusion)
    for p in ema.parameters():
        p.requires_grad_(False)
    lr = 1e-3
    opt = torch.optim.Adam(diffusion.parameters(), lr=lr, betas=(0.9, 0.99))
    config = {"train_lr": lr, "adam_betas": (0.9, 0.99), "max_grad_norm": 1.0, "ema_decay": 0.995,
              "timesteps": 200, "train_batch_size": 32}
    with tracelab.Recorder(run_dir, model=diffusion, optimizer=opt, config=config) as rec:
        for step in range(train_num_steps):
            diffusion.train()
            idx = torch.randint(0, len(data), (32,), generator=gen)
            loss, noisy, model_out = diffusion(data[idx], gen)
            loss.backward()
            nn.utils.clip_grad_norm_(diffusion.parameters(), 1.)
            opt.step()
            opt.zero_grad()
            with torch.no_grad():
                for pe, pm in zip(ema.parameters(), diffusion.parameters()):
                    pe.lerp_(pm, 1 - 0.995)
            rec.step(loss=loss, inputs=noisy, outputs=model_out)
            if (step + 1) % 50 == 0:
                ema.eval()
                with torch.no_grad():
                    val_loss, _, _ = ema.p_losses(held_out * 2 - 1, fixed_t, fixed_noise)
                rec.log("val", metrics={"loss": val_loss.item()})
