"""Spijkervet/SimCLR (simclr/simclr.py, simclr/modules/nt_xent.py, main.py), shrunk: an encoder
with its fc replaced by Identity (a small two-block ResNet-style CNN instead of ResNet-18),
the projector Linear(n_features, n_features, bias=False), ReLU, Linear(n_features,
projection_dim=64, bias=False), NT_Xent(batch_size, temperature=0.5, world_size=1) with its
CrossEntropyLoss(reduction="sum") divided by 2N, Adam(lr=3e-4), two augmented views per image
(TransformsSimCLR stand-in: a random shift of up to one pixel, random erasing of a 3x3 patch,
brightness jitter), batch 128 with the last partial batch dropped. Data: scikit-learn's digits
(no labels used); 4 epochs; 16-32 channels, projection_dim 32 (of 64). Validation: the NT-Xent loss on the held-out images.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracelab
from _x_data import batches, digits

SOURCE = ("https://github.com/Spijkervet/SimCLR/blob/2738efae85b3ca1b70b7919c5d7a7837d9d75235/"
          "simclr/modules/nt_xent.py")
BUGS = (None,)


class NT_Xent(nn.Module):
    def __init__(self, batch_size, temperature, world_size=1):
        super().__init__()
        self.batch_size, self.temperature = batch_size, temperature
        N = 2 * batch_size * world_size
        mask = torch.ones((N, N), dtype=bool).fill_diagonal_(0)
        for i in range(batch_size * world_size):
            mask[i, batch_size * world_size + i] = 0
            mask[batch_size * world_size + i, i] = 0
        self.mask = mask
        self.criterion = nn.CrossEntropyLoss(reduction="sum")
        self.similarity_f = nn.CosineSimilarity(dim=2)

    def forward(self, z_i, z_j):
        N = 2 * self.batch_size
        z = torch.cat((z_i, z_j), dim=0)
        sim = self.similarity_f(z.unsqueeze(1), z.unsqueeze(0)) / self.temperature
        positive = torch.cat((torch.diag(sim, self.batch_size),
                              torch.diag(sim, -self.batch_size)), dim=0).reshape(N, 1)
        negative = sim[self.mask].reshape(N, -1)
        labels = torch.zeros(N).long()
        logits = torch.cat((positive, negative), dim=1)
        return self.criterion(logits, labels) / N


class Block(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.short = nn.Sequential(nn.Conv2d(c_in, c_out, 1, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.short(x))


class SimCLR(nn.Module):
    def __init__(self, n_features=32, projection_dim=32):
        super().__init__()
        self.encoder = nn.Sequential(Block(1, 16), nn.MaxPool2d(2), Block(16, 32),
                                     nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Identity())
        self.projector = nn.Sequential(nn.Linear(n_features, n_features, bias=False), nn.ReLU(),
                                       nn.Linear(n_features, projection_dim, bias=False))

    def forward(self, x_i, x_j):
        h_i, h_j = self.encoder(x_i), self.encoder(x_j)
        return h_i, h_j, self.projector(h_i), self.projector(h_j)


def _augment(x, gen):
    n = len(x)
    shifts = torch.randint(-1, 2, (2,), generator=gen)
    x = torch.roll(x, shifts=(int(shifts[0]), int(shifts[1])), dims=(2, 3))
    x = x * (0.8 + 0.4 * torch.rand(n, 1, 1, 1, generator=gen))
    i, j = (int(v) for v in torch.randint(0, 6, (2,), generator=gen))
    keep = torch.rand(n, 1, 1, 1, generator=gen) > 0.5
    x = x.clone()
    x[:, :, i:i + 3, j:j + 3] = x[:, :, i:i + 3, j:j + 3] * keep
    return x


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 4) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, _, x_val, _ = digits(seed, n_val=256)
    batch_size = 128
    model = SimCLR()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    criterion = NT_Xent(batch_size, 0.5)
    with tracelab.Recorder(run_dir, model=model, optimizer=optimizer,
                           config={"lr": 3e-4, "batch_size": batch_size, "temperature": 0.5,
                                   "projection_dim": 32}) as rec:
        for _ in range(epochs):
            model.train()
            for idx in batches(len(x_train), batch_size, gen):
                if len(idx) < batch_size:
                    continue
                x_i, x_j = _augment(x_train[idx], gen), _augment(x_train[idx], gen)
                optimizer.zero_grad()
                h_i, h_j, z_i, z_j = model(x_i, x_j)
                loss = criterion(z_i, z_j)
                loss.backward()
                optimizer.step()
                rec.step(loss=loss, inputs=x_i)
            model.eval()
            with torch.no_grad():
                losses = []
                for k in range(0, len(x_val), batch_size):
                    xb = x_val[k:k + batch_size]
                    _, _, z_i, z_j = model(_augment(xb, gen), _augment(xb, gen))
                    losses.append(criterion(z_i, z_j).item())
            rec.log("val", metrics={"loss": sum(losses) / len(losses)})
