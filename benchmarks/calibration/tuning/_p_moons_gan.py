"""dataflowr/notebooks Module10/sol/10_GAN_double_moon_sol.ipynb, shrunk: its generator
(Linear(32, 128), ReLU, Linear(128, 2)) and sigmoid discriminator (Linear(2, 128), ReLU,
Linear(128, 1), Sigmoid) on scikit-learn's make_moons(2000, noise=0.05), the notebook's
hand-written losses (D: -mean(log(1 - D(G(z))) + log D(x)); G: -mean(log D(G(z)))), two
Adam(lr=1e-3), batch 50; 15 epochs instead of 500.

`bug` (None: the notebook as published):
- "no-g-zero-grad": optimizer_G.zero_grad() left out, so the generator's gradients pile up over
  steps, the discriminator's loss (fake_batch not detached) leaking into them as well.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
from sklearn.datasets import make_moons

import tracelab

SOURCE = ("https://github.com/dataflowr/notebooks/blob/043dff0f792a5ae67005ba147f7b9dd5fc66e2a1/"
          "Module10/sol/10_GAN_double_moon_sol.ipynb")
BUGS = (None, "no-g-zero-grad")


def _quality(fake: np.ndarray, real: np.ndarray) -> tuple[float, float]:
    """Mean distance from each generated point to its nearest real point (precision) and from
    each of 500 real points to its nearest generated point (coverage)."""
    d = np.sqrt(((fake[:, None, :] - real[None, :500, :]) ** 2).sum(-1))
    return float(d.min(1).mean()), float(d.min(0).mean())


def run(run_dir: str, seed: int = 0, bug: str | None = None, nb_epochs: int = 15) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    X, _ = make_moons(n_samples=2000, noise=0.05, random_state=seed)
    z_dim, hidden_dim, batch_size, lr = 32, 128, 50, 1e-3
    net_G = nn.Sequential(nn.Linear(z_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, 2))
    net_D = nn.Sequential(nn.Linear(2, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, 1),
                          nn.Sigmoid())
    optimizer_G = torch.optim.Adam(net_G.parameters(), lr=lr)
    optimizer_D = torch.optim.Adam(net_D.parameters(), lr=lr)
    with tracelab.Recorder(run_dir, model=nn.ModuleDict({"G": net_G, "D": net_D}),
                           optimizer={"G": optimizer_G, "D": optimizer_D},
                           config={"lr": lr, "batch_size": batch_size, "z_dim": z_dim}) as rec:
        for e in range(nb_epochs):
            rng.shuffle(X)
            real_samples = torch.from_numpy(X).type(torch.FloatTensor)
            for real_batch in real_samples.split(batch_size):
                z = torch.empty(batch_size, z_dim).normal_()
                fake_batch = net_G(z)
                D_scores_on_real = net_D(real_batch)
                D_scores_on_fake = net_D(fake_batch)
                loss_d = -torch.mean(torch.log(1 - D_scores_on_fake) + torch.log(D_scores_on_real))
                optimizer_D.zero_grad()
                loss_d.backward()
                optimizer_D.step()

                z = torch.empty(batch_size, z_dim).normal_()
                fake_batch = net_G(z)
                D_scores_on_fake = net_D(fake_batch)
                loss_g = -torch.mean(torch.log(D_scores_on_fake))
                if bug != "no-g-zero-grad":
                    optimizer_G.zero_grad()
                loss_g.backward()
                optimizer_G.step()
                rec.step(loss=loss_g, inputs=real_batch, outputs=D_scores_on_fake,
                         metrics={"loss_d": loss_d.item()})
            with torch.no_grad():
                fake = net_G(torch.randn(500, z_dim)).numpy()
            precision, coverage = _quality(fake, X)
            rec.log("val", metrics={"fake_to_real": precision, "real_to_fake": coverage})
    print(f"    moons gan bug={bug}: fake-to-real {precision:.3f} real-to-fake {coverage:.3f}")
