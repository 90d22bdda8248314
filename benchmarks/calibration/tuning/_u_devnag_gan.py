"""devnag/pytorch-generative-adversarial-networks gan_pytorch.py, shrunk: its Generator (1 -> 50
ELU -> 50 sigmoid -> 1) fed uniform noise, its Discriminator (ELU, ELU, sigmoid) that judges a
whole minibatch of 100 samples at once ("Data and variances": the samples and their squared
distances to the batch mean, 200 inputs), nn.BCELoss, two Adam(lr=2e-4, betas=(0.9, 0.999))
optimizers, one D step (real then fake, fake detached) and one G step per epoch; the real data
N(4, 1.25). 2,500 epochs instead of 30,000 with both learning rates 2e-3 (ten times the
script's). Every 100 epochs the generated sample's mean and standard deviation are logged with
their distance to the real ones.

`bug` plants one fault (None: the script as published):
- "no-d-zero": D.zero_grad() left out of the discriminator step;
- "g-step-d-opt": the generator step calls d_optimizer.step() instead of g_optimizer.step().
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

import tracelab

SOURCE = ("https://github.com/devnag/pytorch-generative-adversarial-networks/blob/"
          "2238e9435bd8182e801bb615c79735b219992b6b/gan_pytorch.py")
BUGS = (None, "no-d-zero", "g-step-d-opt")


class Generator(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.map1 = nn.Linear(input_size, hidden_size)
        self.map2 = nn.Linear(hidden_size, hidden_size)
        self.map3 = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        x = F.elu(self.map1(x))
        x = torch.sigmoid(self.map2(x))
        return self.map3(x)


class Discriminator(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.map1 = nn.Linear(input_size, hidden_size)
        self.map2 = nn.Linear(hidden_size, hidden_size)
        self.map3 = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        x = F.elu(self.map1(x))
        x = F.elu(self.map2(x))
        return torch.sigmoid(self.map3(x))


def decorate_with_diffs(data, exponent):
    mean = torch.mean(data, 1, keepdim=True)
    diffs = torch.pow(data - mean, exponent)
    return torch.cat([data, diffs], 1)


def run(run_dir: str, seed: int = 0, bug: str | None = None, num_epochs: int = 2500) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    data_mean, data_stddev = 4.0, 1.25
    d_input_size = minibatch_size = 100
    preprocess, d_input_func = (lambda data: decorate_with_diffs(data, 2.0)), (lambda x: x * 2)

    def d_sampler(n):
        return torch.tensor(rng.normal(data_mean, data_stddev, (1, n)), dtype=torch.float32)

    def gi_sampler(m, n):
        return torch.rand(m, n)

    G = Generator(1, 50, 1)
    D = Discriminator(d_input_func(d_input_size), 50, 1)
    criterion = nn.BCELoss()
    lr, betas = 2e-3, (0.9, 0.999)
    d_optimizer = optim.Adam(D.parameters(), lr=lr, betas=betas)
    g_optimizer = optim.Adam(G.parameters(), lr=lr, betas=betas)
    ones, zeros = torch.ones(1, 1), torch.zeros(1, 1)
    with tracelab.Recorder(run_dir, model=nn.ModuleDict({"G": G, "D": D}),
                           optimizer={"G": g_optimizer, "D": d_optimizer}, loss_fn=criterion,
                           config={"d_lr": lr, "g_lr": lr, "betas": betas,
                                   "minibatch_size": minibatch_size}) as rec:
        for epoch in range(num_epochs):
            # 1. Train D on real + fake
            if bug != "no-d-zero":
                D.zero_grad()
            d_real_data = d_sampler(d_input_size)
            d_real_input = preprocess(d_real_data)
            d_real_decision = D(d_real_input)
            d_real_error = criterion(d_real_decision, ones)
            d_real_error.backward()
            d_gen_input = gi_sampler(minibatch_size, 1)
            d_fake_data = G(d_gen_input).detach()
            d_fake_decision = D(preprocess(d_fake_data.t()))
            d_fake_error = criterion(d_fake_decision, zeros)
            d_fake_error.backward()
            d_optimizer.step()
            # 2. Train G on D's response
            G.zero_grad()
            gen_input = gi_sampler(minibatch_size, 1)
            g_fake_data = G(gen_input)
            dg_fake_decision = D(preprocess(g_fake_data.t()))
            g_error = criterion(dg_fake_decision, ones)
            g_error.backward()
            (d_optimizer if bug == "g-step-d-opt" else g_optimizer).step()
            rec.step(loss=g_error, inputs=d_real_input, outputs=d_real_decision, targets=ones,
                     metrics={"loss_D": d_real_error + d_fake_error})
            if (epoch + 1) % 100 == 0:
                with torch.no_grad():
                    fake = G(gi_sampler(1000, 1))
                m, s = float(fake.mean()), float(fake.std())
                rec.log("val", metrics={"fake_mean": m, "fake_std": s,
                                        "mean_gap": abs(m - data_mean),
                                        "std_gap": abs(s - data_stddev)})
