"""d2l-en chapter_generative-adversarial-networks/gan.md (PyTorch tab), kept whole but shorter:
the same "real" data (1,000 Gaussian points through A, b), a one-Linear generator, a 2-5-3-1 tanh
discriminator, weights drawn from N(0, 0.02), BCEWithLogitsLoss(reduction='sum'), Adam(0.05)
for D and Adam(0.005) for G, batch size 8, update_D then update_G each batch; 8 epochs instead
of 20. Each epoch ends with the distance between the means and covariances of 1,000 generated
and the real points, recorded as the validation split.

Bug (`bug=`): "g-steps-d" (update_G calls trainer_D.step() in place of trainer_G.step(), so the
generator never moves)."""
from __future__ import annotations

import torch
from torch import nn

import tracelab


def update_D(X, Z, net_D, net_G, loss, trainer_D):
    batch_size = X.shape[0]
    ones = torch.ones((batch_size,))
    zeros = torch.zeros((batch_size,))
    trainer_D.zero_grad()
    real_Y = net_D(X)
    fake_X = net_G(Z)
    fake_Y = net_D(fake_X.detach())
    loss_D = (loss(real_Y, ones.reshape(real_Y.shape)) +
              loss(fake_Y, zeros.reshape(fake_Y.shape))) / 2
    loss_D.backward()
    trainer_D.step()
    return loss_D


def update_G(Z, net_D, net_G, loss, trainer_G, stepped):
    batch_size = Z.shape[0]
    ones = torch.ones((batch_size,))
    trainer_G.zero_grad()
    fake_X = net_G(Z)
    fake_Y = net_D(fake_X)
    loss_G = loss(fake_Y, ones.reshape(fake_Y.shape))
    loss_G.backward()
    stepped.step()
    return loss_G


def train(run_dir: str, seed: int = 0, *, bug: str | None = None, num_epochs: int = 8,
          lr_D: float = 0.05, lr_G: float = 0.005, latent_dim: int = 2) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    X = torch.normal(0.0, 1, (1000, 2))
    A = torch.tensor([[1, 2], [-0.1, 0.5]])
    b = torch.tensor([1, 2])
    data = torch.matmul(X, A) + b
    batch_size = 8
    net_G = nn.Sequential(nn.Linear(2, 2))
    net_D = nn.Sequential(nn.Linear(2, 5), nn.Tanh(), nn.Linear(5, 3), nn.Tanh(),
                          nn.Linear(3, 1))
    loss = nn.BCEWithLogitsLoss(reduction="sum")
    for w in net_D.parameters():
        nn.init.normal_(w, 0, 0.02)
    for w in net_G.parameters():
        nn.init.normal_(w, 0, 0.02)
    trainer_D = torch.optim.Adam(net_D.parameters(), lr=lr_D)
    trainer_G = torch.optim.Adam(net_G.parameters(), lr=lr_G)
    g_stepper = trainer_D if bug == "g-steps-d" else trainer_G
    model = nn.ModuleDict({"G": net_G, "D": net_D})
    config = {"lr_D": lr_D, "lr_G": lr_G, "batch_size": batch_size, "latent_dim": latent_dim}
    with tracelab.Recorder(run_dir, model=model, optimizer={"G": trainer_G, "D": trainer_D},
                           loss_fn=loss, config=config) as rec:
        for _ in range(num_epochs):
            for idx in torch.randperm(len(data)).split(batch_size):
                X = data[idx]
                Z = torch.normal(0, 1, size=(X.shape[0], latent_dim))
                loss_D = update_D(X, Z, net_D, net_G, loss, trainer_D)
                loss_G = update_G(Z, net_D, net_G, loss, trainer_G, g_stepper)
                rec.step(loss=loss_G, inputs=X, metrics={"loss_D": loss_D})
            with torch.no_grad():
                fake_X = net_G(torch.normal(0, 1, size=(1000, latent_dim)))
                mean_gap = (fake_X.mean(0) - data.mean(0)).norm()
                cov_gap = (torch.cov(fake_X.T) - torch.cov(data.T)).norm()
            rec.log("val", metrics={"mean_gap": mean_gap, "cov_gap": cov_gap}, inputs=fake_X)
