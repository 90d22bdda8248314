"""A tiny real GAN for the rules on a game's loss (a few seconds on one CPU thread): d2l's GAN on
Gaussian data, shorter: a one-Linear generator, a 2-5-3-1 tanh discriminator, weights drawn from
N(0, 0.02), BCEWithLogitsLoss(reduction="sum"), Adam for each player (the discriminator's lr
0.05 as in the book), batch size 8; the recorded loss is the generator's, or the two summed."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Optional

import torch
from torch import nn

import tracelab


def train(run_dir: Path, *, steps: int = 500, lr_d: float = 0.05, lr_g: float = 0.005,
          summed: bool = False, outlier_at: Optional[int] = None, scale: float = 100.0,
          lr_rise_at: Optional[int] = None, rise: float = 20.0, seed: int = 0) -> Path:
    """Train for `steps` batches; `outlier_at`: the real batch of that step scaled `scale`
    times (a bad batch the data pipeline let through); `lr_rise_at`: both learning rates
    multiplied by `rise` from that step on (a schedule's mistake)."""
    torch.manual_seed(seed)
    data = torch.normal(0.0, 1, (1000, 2)) @ torch.tensor([[1, 2], [-0.1, 0.5]]) + \
        torch.tensor([1, 2])
    net_g = nn.Sequential(nn.Linear(2, 2))
    net_d = nn.Sequential(nn.Linear(2, 5), nn.Tanh(), nn.Linear(5, 3), nn.Tanh(),
                          nn.Linear(3, 1))
    for w in [*net_d.parameters(), *net_g.parameters()]:
        nn.init.normal_(w, 0, 0.02)
    loss = nn.BCEWithLogitsLoss(reduction="sum")
    opt_d = torch.optim.Adam(net_d.parameters(), lr=lr_d)
    opt_g = torch.optim.Adam(net_g.parameters(), lr=lr_g)
    model = nn.ModuleDict({"G": net_g, "D": net_d})
    with tracelab.Recorder(str(run_dir), model=model, optimizer={"G": opt_g, "D": opt_d},
                           loss_fn=loss) as rec:
        step = 0
        while step < steps:
            for idx in torch.randperm(len(data)).split(8):
                if step >= steps:
                    break
                x = data[idx] * (scale if step == outlier_at else 1.0)
                if step == lr_rise_at:
                    for group in [*opt_d.param_groups, *opt_g.param_groups]:
                        group["lr"] *= rise
                z = torch.normal(0, 1, size=(len(x), 2))
                ones, zeros = torch.ones((len(x), 1)), torch.zeros((len(x), 1))
                opt_d.zero_grad()
                loss_d = (loss(net_d(x), ones) + loss(net_d(net_g(z).detach()), zeros)) / 2
                loss_d.backward()
                opt_d.step()
                opt_g.zero_grad()
                loss_g = loss(net_d(net_g(z)), ones)
                loss_g.backward()
                opt_g.step()
                rec.step(loss=loss_g + loss_d.detach() if summed else loss_g, inputs=x)
                step += 1
    return run_dir


def one_optimizer(run_dir: Path, into: Path) -> Path:
    """A copy of the run whose meta.json holds the discriminator's optimizer alone: the same
    losses, as a run of one optimizer would record them."""
    shutil.copytree(run_dir, into)
    meta = json.loads((into / "meta.json").read_text())
    meta["optimizers"] = {k: v for k, v in meta["optimizers"].items() if k == "D"}
    (into / "meta.json").write_text(json.dumps(meta))
    return into
