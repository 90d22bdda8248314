"""labmlai/annotated_deep_learning_paper_implementations labml_nn/gan/original (experiment.py
and the losses of __init__.py), shrunk: the MLP Generator (Linear+LeakyReLU(0.2) 256-512-1024,
Linear+Tanh) and Discriminator (1024-512-256 LeakyReLU(0.2), Linear to one logit), weights_init
normal(0, 0.02), DiscriminatorLogitsLoss / GeneratorLogitsLoss (BCEWithLogitsLoss with
label smoothing 0.2 drawn uniformly), Adam(lr=2.5e-4, betas=(0.5, 0.999)) for each, one
discriminator step then one generator step per batch, the fake batch detached for the
discriminator. Data: scikit-learn's digits normalized to [-1, 1] (64 pixels instead of 784;
layer sizes halved), batch 64, 5 epochs.

`bug` (None: as published):
- "d-no-zero-grad": discriminator_optimizer.zero_grad() left out, so the discriminator's
  gradients pile up across steps (and take in those of the generator's backward).
"""
from __future__ import annotations

import torch
import torch.nn as nn

import tracelab
from _x_data import batches, digits

SOURCE = ("https://github.com/labmlai/annotated_deep_learning_paper_implementations/blob/"
          "1b702523b93332a36e35a181406da777f9b87fbb/labml_nn/gan/original/experiment.py")
BUGS = (None, "d-no-zero-grad")


def weights_init(m):
    if isinstance(m, nn.Linear):
        nn.init.normal_(m.weight.data, 0.0, 0.02)


def _mlp(sizes, last):
    layers = []
    for a, b in zip(sizes[:-2], sizes[1:-1]):
        layers += [nn.Linear(a, b), nn.LeakyReLU(0.2)]
    return nn.Sequential(*layers, nn.Linear(sizes[-2], sizes[-1]), *last)


def _labels(n, r1, r2):
    return torch.empty(n, 1).uniform_(r1, r2)


def run(run_dir: str, seed: int = 0, bug: str | None = None, epochs: int = 5) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x_train, _, _, _ = digits(seed, n_val=0)
    data_all = (x_train.view(-1, 64) - 0.5) / 0.5
    generator = _mlp([100, 128, 256, 512, 64], [nn.Tanh()])
    discriminator = _mlp([64, 512, 256, 128, 1], [])
    generator.apply(weights_init)
    discriminator.apply(weights_init)
    g_opt = torch.optim.Adam(generator.parameters(), lr=2.5e-4, betas=(0.5, 0.999))
    d_opt = torch.optim.Adam(discriminator.parameters(), lr=2.5e-4, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    smoothing = 0.2
    model = nn.ModuleDict({"generator": generator, "discriminator": discriminator})
    with tracelab.Recorder(run_dir, model=model, optimizer={"g": g_opt, "d": d_opt},
                           loss_fn=bce, config={"lr": 2.5e-4, "betas": [0.5, 0.999],
                                                "label_smoothing": smoothing,
                                                "batch_size": 64}) as rec:
        for _ in range(epochs):
            for idx in batches(len(data_all), 64, gen):
                data = data_all[idx]
                n = len(data)
                latent = torch.randn(n, 100)
                logits_true = discriminator(data)
                logits_false = discriminator(generator(latent).detach())
                d_loss = (bce(logits_true, _labels(n, 1.0 - smoothing, 1.0))
                          + bce(logits_false, _labels(n, 0.0, smoothing)))
                if bug != "d-no-zero-grad":
                    d_opt.zero_grad()
                d_loss.backward()
                d_opt.step()
                latent = torch.randn(n, 100)
                logits = discriminator(generator(latent))
                g_loss = bce(logits, _labels(n, 1.0 - smoothing, 1.0))
                g_opt.zero_grad()
                g_loss.backward()
                g_opt.step()
                rec.step(loss=g_loss, inputs=data, metrics={"loss_d": d_loss.item()},
                         outputs=logits)
