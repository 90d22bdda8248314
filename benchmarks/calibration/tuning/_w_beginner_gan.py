"""L1aoXingyu/pytorch-beginner 09-Generative Adversarial network/simple_Gan.py, shrunk: its
discriminator (784-256-256-1, LeakyReLU(0.2), Sigmoid) and generator (100-256-256-784, ReLU,
Tanh), nn.BCELoss, one Adam(lr=3e-4) for each, batch 128, images normalized to [-1, 1]
(Normalize(0.5, 0.5)); each batch a discriminator step on real and fake, then a generator step.
The labels are (N, 1) like D's output (today's BCELoss refuses the script's (N,)). The data is
scikit-learn's 8x8 digits upsampled to 28x28.

`bug` plants one fault (None: the script as published):
- "g-opt-on-d": g_optimizer built on D.parameters(), so the generator's parameters are in no
  optimizer.
"""
from __future__ import annotations

import torch
import torch.nn as nn

import tracelab
from _w_data import batches, digits, to_tensor

SOURCE = ("https://github.com/L1aoXingyu/pytorch-beginner/blob/"
          "29cab65745f4e8283ebae7e631c9ec1d074955d3/09-Generative%20Adversarial%20network/"
          "simple_Gan.py")
BUGS = (None, "g-opt-on-d")


class discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.dis = nn.Sequential(
            nn.Linear(784, 256), nn.LeakyReLU(0.2),
            nn.Linear(256, 256), nn.LeakyReLU(0.2),
            nn.Linear(256, 1), nn.Sigmoid())

    def forward(self, x):
        return self.dis(x)


class generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.gen = nn.Sequential(
            nn.Linear(100, 256), nn.ReLU(True),
            nn.Linear(256, 256), nn.ReLU(True),
            nn.Linear(256, 784), nn.Tanh())

    def forward(self, x):
        return self.gen(x)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 8,
        batch_size: int = 128, z_dimension: int = 100) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, _, _, _ = digits(seed, n_val=0)
    D, G = discriminator(), generator()
    criterion = nn.BCELoss()
    d_optimizer = torch.optim.Adam(D.parameters(), lr=0.0003)
    g_optimizer = torch.optim.Adam((D if bug == "g-opt-on-d" else G).parameters(), lr=0.0003)
    model = nn.ModuleDict({"G": G, "D": D})
    with tracelab.Recorder(run_dir, model=model, optimizer={"d": d_optimizer, "g": g_optimizer},
                           loss_fn=criterion,
                           config={"lr": 3e-4, "batch_size": batch_size}) as rec:
        for _ in range(epochs):
            for idx in batches(len(x_train), batch_size, gen):
                num_img = len(idx)
                real_img = ((to_tensor(x_train[idx]) - 0.5) / 0.5).view(num_img, -1)
                real_label = torch.ones(num_img, 1)
                fake_label = torch.zeros(num_img, 1)
                real_out = D(real_img)
                d_loss_real = criterion(real_out, real_label)
                z = torch.randn(num_img, z_dimension)
                fake_img = G(z)
                fake_out = D(fake_img)
                d_loss_fake = criterion(fake_out, fake_label)
                d_loss = d_loss_real + d_loss_fake
                d_optimizer.zero_grad()
                d_loss.backward()
                d_optimizer.step()

                z = torch.randn(num_img, z_dimension)
                fake_img = G(z)
                output = D(fake_img)
                g_loss = criterion(output, real_label)
                g_optimizer.zero_grad()
                g_loss.backward()
                g_optimizer.step()
                rec.step(loss=g_loss, inputs=real_img,
                         metrics={"d_loss": d_loss.item(), "g_loss": g_loss.item(),
                                  "d_real": real_out.mean().item(),
                                  "d_fake": fake_out.mean().item()})
